// A new episode of unreadable checks starts its backoff at the shortest delay again.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct CheckBackoffResetTests {
    /// Guarantees, "Several programs, one file": when a check "cannot read the file at that moment (EMFILE, EIO),
    /// the error is reported and the read is tried again with the backoff (100 ms, doubling up to 30 s) until it
    /// succeeds".
    ///
    /// The count of failed checks (`CellExtras.failedChecks`) that the backoff doubles with is reset only by a check
    /// that reads (`CellState.finish`, `.checked`), never by a reread that succeeds (`.read`). A storage whose first
    /// read failed for a while (its rereads count as failed checks) and then succeeded keeps the count: the next
    /// time a check cannot read the file, days later, its first retry waits 30 s instead of 100 ms, and another
    /// program's change goes unseen for that long (and a read-modify-write in the meantime overwrites it).
    @Test func aNewEpisodeOfUnreadableChecksStartsAtTheShortestDelay() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            try replaceFromOutside(file, with: "\"stored\"")
            let reads = Switch(true)
            let writes = Switch(false)
            installReadWriteFaults(in: directory, name: "k", reads: reads, writes: writes)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let scheduler = ManualScheduler()
            let watched: WLStorage<String> = manualStorage("k", in: directory, default: "default", scheduler: scheduler)
            try #require(watched.lastError?.code == .readFailed)
            // Two minutes of a disk that fails, then it recovers and the stored value is read.
            for _ in 0..<4 { scheduler.advance(by: .seconds(30)) }
            reads.set(false)
            scheduler.advance(by: .seconds(31))
            // The reread the advance starts ends on a thread of its own: waited for, as a loaded machine may be slow.
            try #require(
                await waitUntil(timeout: 30) { watched.wrappedValue == "stored" && hasNoCheckLeft(watched) },
                "the storage holds \(watched.wrappedValue)")
            try #require(scheduler.pendingJobs == 0, "retries still wait: \(scheduler.pendingDelays)")
            // Much later, one read fails again, when another program stores a value.
            reads.set(true)
            try replaceFromOutside(file, with: "\"outside\"")
            try #require(
                await waitUntil(timeout: 30) { scheduler.pendingJobs >= 1 }, "the failed check scheduled no retry")
            let delay = scheduler.pendingDelays.first ?? 0
            #expect(
                delay <= WriteThrottle.minimumRetryDelay,
                "the first retry of a new failure waits \(Double(delay) / 1e9) s, not 100 ms")
            reads.set(false)
            scheduler.advance(by: .seconds(60))
            #expect(watched.wrappedValue == "outside")
        }
    }
}
