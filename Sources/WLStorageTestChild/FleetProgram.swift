import Foundation
import WLStorage
import WLStorageFleet

/// A program of the fleet test over a directory (see `FleetProgram` for its commands).
///
/// Usage: WLStorageTestChild fleet DIRECTORY VERSION FLUSH-INTERVAL, with VERSION 1 or 2 and FLUSH-INTERVAL a number of
/// seconds or `none`.
func fleetProgram(directory: URL, version: String, flushInterval: String) -> Never {
    guard let version = Int(version).flatMap(FleetVersion.init(rawValue:)) else {
        say("unknown version \(version)", to: FileHandle.standardError)
        exit(64)
    }
    FleetProgram.run(version: version, flushInterval: Int(flushInterval), store: .directory(directory))
}
