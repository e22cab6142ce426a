import Foundation
import WLStorage
import WLStorageFleet
import WLStoragePostgres

/// A program of the fleet test over a PostgreSQL table (see `FleetProgram` for its commands).
///
/// Usage: WLStoragePostgresTestChild --fleet URL NAMESPACE VERSION FLUSH-INTERVAL, with VERSION 1 or 2 and
/// FLUSH-INTERVAL a number of seconds or `none`.
func runFleetMode(_ arguments: [String]) -> Never {
    guard arguments.count == 6, let version = Int(arguments[4]).flatMap(FleetVersion.init(rawValue:)) else {
        FileHandle.standardError.write(
            Data("usage: WLStoragePostgresTestChild --fleet URL NAMESPACE VERSION FLUSH-INTERVAL\n".utf8))
        exit(64)
    }
    let store = openStore(url: arguments[2], namespace: arguments[3], timeout: .seconds(10))
    FleetProgram.run(version: version, flushInterval: Int(arguments[5]), store: store)
}
