// A released storage with a long flush interval retries its failed write with the backoff, within seconds.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct ReleasedStorageRetryTests {
    /// "The value stays pending in memory and is retried with the backoff (at least 100 ms, doubling up to 30 s),
    /// whatever the storage's flush interval."
    @Test(arguments: [3_600, 1_000_000_000])
    func aReleasedStorageWithALongIntervalRetriesItsFailedWriteWithinSeconds(interval: Int) throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let failing = TakenFlag(false)
            FaultInjection.install(
                { call, name in call == .rename && name == "k" && failing.isSet ? .fail(ENOSPC) : nil },
                forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            do {
                let stored = fileStorage("k", in: directory, default: "", flushInterval: interval)
                stored.flush()
                try #require(FileManager.default.fileExists(atPath: path + "/k"), "the default was not saved")
                failing.set(true)
                stored.wrappedValue = "pending"
            }
            // The deinit write failed; space comes back.
            failing.set(false)
            #expect(
                eventually(timeout: 30) { stored(String.self, key: "k", in: directory) == "pending" },
                "not written within 10 s; the file holds \(stored(String.self, key: "k", in: directory) ?? "nil")")
        }
    }
}
