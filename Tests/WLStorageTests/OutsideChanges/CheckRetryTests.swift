// Another program's change is taken even when checking for it failed at first; failed checks are retried with a
// backoff, one retry at a time.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct OutsideWriteAfterAFailedReadTests {
    /// The first read fails (EIO); then another program stores a value. The storage takes it, and a set after that
    /// is written.
    @Test func anOutsideWriteAfterAFailedFirstReadIsTaken() throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"stored\"")
            let failing = TakenFlag(true)
            FaultInjection.install(
                { call, name in call == .read && name == "k" && failing.take() ? .fail(EIO) : nil },
                forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            let watched = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            try #require(watched.lastError?.code == .readFailed)
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            #expect(eventually(timeout: 30) { watched.wrappedValue == "outside" })
            watched.wrappedValue = "mine"
            watched.flush()
            #expect(stored(String.self, key: "k", in: directory) == "mine")
        }
    }
}

@Suite(.capturingOutput) struct NotificationDrainTests {
    /// "A set never waits for the disk", and the lock is "held for a few nanoseconds". With a listener, the thread
    /// whose set finds no one delivering becomes the deliverer, and delivers every notification queued after it,
    /// for as long as other threads keep setting: one set of one thread takes seconds (and the queue of undelivered
    /// notifications grows to tens of thousands of values). Counted, not timed: how many notifications each set
    /// delivered on its own thread. One batch is at most the backlog the package keeps.
    @Test func aSetDoesNotDeliverOtherThreadsChangesForSeconds() throws {
        try withTemporaryDirectory { directory in
            let counter = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            let deliveries = Lock<[UInt: Int]>([:])
            @Sendable func thread() -> UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }
            @Sendable func deliveredHere() -> Int { deliveries.withLock { $0[thread()] ?? 0 } }
            let listener = counter.cell.addListener(sendingCurrent: false) { _ in
                deliveries.withLock { $0[thread(), default: 0] += 1 }
            }
            defer { counter.cell.removeListener(listener) }
            let most = Lock<[Int]>([])
            let group = DispatchGroup()
            for _ in 0..<2 {
                group.enter()
                Thread.detachNewThread {
                    var worst = 0
                    for next in 1...200_000 {
                        let before = deliveredHere()
                        counter.wrappedValue = next
                        worst = max(worst, deliveredHere() - before)
                    }
                    most.withLock { $0.append(worst) }
                    group.leave()
                }
            }
            group.wait()
            let worst = most.withLock { $0.max() ?? 0 }
            let bound = 2 * CellState<Int>.notificationBacklog
            #expect(worst <= bound, "one set delivered \(worst) notifications on its own thread")
        }
    }
}

@Suite(.capturingOutput) struct FailedCheckTests {
    /// Another program stores a value; the read of the check fails once (EMFILE in a busy server, EIO). The change
    /// is reported and then forgotten: nothing reads the file again, the storage serves its old value for good, and
    /// its next change (a read-modify-write of that old value) overwrites the other program's value.
    @Test(arguments: [SystemCall.open, .read, .stat])
    func anOutsideChangeWhoseCheckFailedOnceIsStillTaken(call failing: SystemCall) throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            // Stored before the storage opens, so that no write of its own comes back as an event to check.
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"mine\"")
            let watched = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            try #require(watched.wrappedValue == "mine")
            let armed = TakenFlag(true)
            FaultInjection.install(
                { call, name in call == failing && name == "k" && armed.take() ? .fail(EMFILE) : nil },
                forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            try #require(eventually(timeout: 30) { !armed.isSet }, "the check did not run")
            #expect(eventually(timeout: 30) { watched.wrappedValue == "outside" }, "holds \(watched.wrappedValue)")
            watched.wrappedValue += "+1"
            watched.flush()
            #expect(stored(String.self, key: "k", in: directory) == "outside+1")
        }
    }
}

@Suite struct CheckRetryTests {
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
            // The event of the write above, if it comes late, finds the file readable.
            try await Task.sleep(for: .milliseconds(300))
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

@Suite struct FailedRereadTests {
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
