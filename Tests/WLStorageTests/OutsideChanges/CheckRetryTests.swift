// Checks of outside changes that cannot be read keep one retry with the backoff, not one per event.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.onTestThreads) struct CheckRetryTests {
    /// Guarantees, "Several programs, one file": when a check "cannot read the file at that moment (EMFILE, EIO),
    /// the error is reported and the read is tried again with the backoff (100 ms, doubling up to 30 s)".
    ///
    /// Every check that fails schedules a retry of its own (`CellState.finish`, `.reported`, sets
    /// `effects.checkRetry`; `StorageCell.perform(_:)` schedules it), and each retry that fails schedules the next:
    /// nothing ties a retry to the ones already waiting. So every inotify event that arrives while the file cannot be
    /// read (another program that writes the file every second on a disk that returns EIO, or a file larger than
    /// `maximumValueSize`, which fails for good) starts one more endless chain of retries. After N events the file is
    /// read, and the error reported, N times per 30 s, forever: the backoff holds per chain, not per storage, and
    /// the scheduled work grows without bound.
    @Test func outsideChangesThatCannotBeReadKeepOneRetryNotOnePerEvent() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let file = directory.appendingPathComponent("k")
            try replaceFromOutside(file, with: "\"mine\"")
            let scheduler = ManualScheduler()
            let watched: WLStorage<String> = manualStorage("k", in: directory, default: "default", scheduler: scheduler)
            try #require(watched.wrappedValue == "mine")
            // A late event of the write above only adds a check: the bounds below hold with it.
            let failing = Switch(true)
            FaultInjection.install(
                { call, name in
                    guard call == .open, name == "k", failing.isOn else { return nil }
                    failing.tally()
                    return .fail(EIO)
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            for round in 1...5 {
                try replaceFromOutside(file, with: "\"outside \(round)\"")
                try #require(
                    await waitUntil(timeout: 30) { failing.tallied >= round && watched.cell.externalChecks >= round },
                    "the check of outside change \(round) did not run")
            }
            // Let the checks end (each ends by scheduling its retry on the manual clock): the retries waiting are then
            // all there will be, however long the checks took.
            try #require(await waitUntil(timeout: 30) { scheduler.pendingJobs >= 1 && hasNoCheckLeft(watched) })
            #expect(scheduler.pendingJobs <= 1, "\(scheduler.pendingJobs) retries wait: \(scheduler.pendingDelays)")
            // Ten minutes of a file that stays unreadable: with the backoff capped at 30 s, about 20 retries and a
            // few for the doublings. Each chain retries on its own.
            let before = watched.cell.externalChecks
            for _ in 0..<20 { scheduler.advance(by: .seconds(30)) }
            let retries = watched.cell.externalChecks - before
            #expect(retries <= 40, "\(retries) reads of the file in ten minutes of backoff")
            failing.set(false)
            scheduler.advance(by: .seconds(60))
            #expect(watched.wrappedValue == "outside 5")
        }
    }
}
