import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.onTestThreads) struct JoinedCellIntervalTests {
    /// Guarantees, "What a crash or a power loss can lose" and the throttle: with `flushInterval` n, "later changes
    /// within flushInterval seconds collapse into one write of the latest value at the end of the interval".
    ///
    /// A storage released with a failed write makes its cell urgent (`WriteThrottle.makeUrgent`), so the retry
    /// ignores the interval. A storage of the same file opened meanwhile shares the cell (as promised), but nothing
    /// ever clears `isUrgent`: once the orphan's value is written, the new storage, whose interval is an hour, writes
    /// every change at once (`waitingInterval` is 0 while urgent). The throttle of that file is gone for the life of
    /// the cell: a storage set thousands of times a second does a durable write (two fsyncs) for each.
    @Test func aStorageThatJoinsAReleasedOnesCellKeepsItsInterval() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let file = directory.appendingPathComponent("k")
            try replaceFromOutside(file, with: "\"start\"")
            let failing = Switch(true)
            FaultInjection.install(
                { call, name in
                    guard call == .rename, failing.isOn else { return nil }
                    failing.tally()
                    return .fail(EIO)
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            do {
                let first = fileStorage("k", in: directory, default: "", flushInterval: 3_600)
                first.wrappedValue = "released"
            }
            try #require(failing.tallied >= 1, "the release's write did not fail")
            let second = fileStorage("k", in: directory, default: "", flushInterval: 3_600)
            try #require(second.wrappedValue == "released")
            // Every write that succeeds starts after this moment: until it, every rename fails.
            let retryAllowed = Runtime.shared.scheduler.now
            failing.set(false)
            // The released storage's value is retried at once, whatever the interval: promised.
            try #require(await waitUntil(timeout: 30) { stored(String.self, key: "k", in: directory) == "released" })
            try #require(await waitUntil(timeout: 30) { !second.hasPendingChanges })
            // Within an hour of that write, a change of the live storage waits for the end of its interval. Asked of
            // the throttle rather than watched on the disk: another test's `flushAll()`, in this process, may write
            // the change at any moment.
            second.wrappedValue = "one"
            second.wrappedValue = "two"
            let now = Runtime.shared.scheduler.now
            let delay = second.cell.state.withLock { state -> UInt64? in
                var throttle = state.throttle
                throttle.disarm()
                return throttle.arm(now: now)?.delay
            }
            #expect(!second.cell.state.withLock { $0.throttle.isUrgent }, "the cell is still urgent")
            // The wait runs an hour from the last write, which started after `retryAllowed`; the test itself may
            // have waited minutes for a thread on a busy machine, so the time since then is added back.
            let sinceRetryAllowed = now - retryAllowed
            #expect(
                (delay ?? 0) + sinceRetryAllowed >= 3_600 * 1_000_000_000,
                "a storage with an interval of an hour writes its next change in \(Double(delay ?? 0) / 1e9) s")
            second.flush()
            #expect(stored(String.self, key: "k", in: directory) == "two")
        }
    }
}
