// An outside change whose reread failed is taken once the file can be read again.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.onTestThreads) struct FailedRereadTests {
    /// Guarantees, "Several programs, one file": another program's change is taken, and "when the file cannot be
    /// read at that moment (EMFILE, EIO), the error is reported and the read is tried again with the backoff until
    /// it succeeds".
    ///
    /// That holds for a storage that read its file once. A storage whose first read failed (it holds the default and
    /// knows nothing stored) checks an outside change with a reread (`CellState.startCheck` returns `.reread`), and a
    /// reread that fails goes through `applyRead(.failed)`, which schedules no retry (only `.reported`, the outcome of
    /// `.check`, sets `checkRetry`), and no tick either when nothing is pending. The disk recovers, and the storage
    /// keeps serving its default for good instead of the other program's value; its next read-modify-write then
    /// discards the change (`changeDiscarded`) or, worse, a program reads the default as if nothing were stored.
    @Test func anOutsideChangeWhoseRereadFailedIsTakenOnceTheFileCanBeRead() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let file = directory.appendingPathComponent("k")
            try replaceFromOutside(file, with: "\"stored\"")
            let failing = Switch(true)
            FaultInjection.install(
                { call, name in
                    guard call == .open, name == "k", failing.isOn else { return nil }
                    failing.tally()
                    return .fail(EIO)
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            let watched = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            try #require(watched.lastError?.code == .readFailed)
            try #require(watched.wrappedValue == "default")
            let failedBefore = failing.tallied
            try replaceFromOutside(file, with: "\"outside\"")
            try #require(
                await waitUntil(timeout: 30) { failing.tallied > failedBefore }, "the outside change was not checked")
            // The failed reread ends before the disk recovers, however long it takes.
            try #require(await waitUntil(timeout: 30) { hasNoCheckLeft(watched) }, "the failed reread did not end")
            failing.set(false)  // the disk recovers
            // The retries back off (100 ms, doubling): generous, for a loaded machine.
            #expect(
                await waitUntil(timeout: 30) { watched.wrappedValue == "outside" },
                "the storage still holds \(watched.wrappedValue); the file holds \"outside\"")
        }
    }
}
