import Foundation
import Testing
import WLStorageFleet

@testable import WLStorage
@testable import WLStorageFiles

// A fleet of real processes sharing one directory: programs of three versions of a type (WLStorageTestChild's `fleet`
// mode; the versions add a field, rename one with `.renamed`, drop one and add an enum case), started, driven, killed
// with SIGKILL and restarted as any version by a run drawn from a seed. The model and its invariants are FleetRun's
// (Sources/WLStorageFleet/FleetRun.swift): every set whose flush returned is, at the end, what the key's file holds,
// or was replaced by a set that could have been written after it; never by a default or a default-filled value; no
// version serves its default while a value it can map is stored; a flushed change is seen by every running version,
// under any name; and nothing is moved aside.
//
// `WLSTORAGE_SEED` replays a run's operations (not the machine's timing); `WLSTORAGE_OPERATIONS` sets the number of
// operations over all runs (400 by default, one run). A failure names its seed. With
// `WLSTORAGE_FLEET_SUMMARY=1`, each run prints what it did, in numbers (for soaks).

/// The directory the fleet shares, as the run sees it.
private struct SharedDirectory: FleetSharedStore {
    let directory: URL

    func start(name: String, version: FleetVersion, flushInterval: Int?) throws -> FleetProcess {
        try FleetProcess(
            name: name, executable: builtProductsDirectory.appendingPathComponent("WLStorageTestChild").path,
            arguments: ["fleet", directory.path, String(version.rawValue), flushInterval.map(String.init) ?? "none"])
    }

    /// A killed process writes nothing more: a rename it made is whole or was never made.
    func awaitGone(name: String) throws {}

    func stored(key: String) throws -> Data? {
        let url = directory.appendingPathComponent(key)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try Data(contentsOf: url)
    }

    func strays(keys: [String]) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { name in
            !keys.contains(name) && !StorageDirectory.isKeptOriginal(name) && !StorageDirectory.isTemporary(name)
        }
    }
}

@Suite(.capturingOutput)
struct DirectoryFleetTests {
    @Test func aFleetOfProcessesSharingADirectoryNeverLosesAFlushedSetToADefault() throws {
        for (seed, operations) in FleetRun.plannedRuns(defaultOperations: 400, operationsPerRun: 400) {
            try withTemporaryDirectory { directory in
                let run = FleetRun(seed: seed, shared: SharedDirectory(directory: directory))
                do {
                    try run.run(operations: operations)
                    if ProcessInfo.processInfo.environment["WLSTORAGE_FLEET_SUMMARY"] == "1" { print(run.summary) }
                } catch let problem as FleetProblem {
                    Issue.record("\(problem)")
                }
            }
        }
    }
}
