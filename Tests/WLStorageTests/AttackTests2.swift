// Second round of attacks, on the commits that released old values after the lock, told observers of adopted values
// with the cell idle, handed notifications to a queue, flushed cells side by side, made released storages urgent and
// retried checks that could not read. Each test states a promise of the Guarantees article and fails on the code it
// was written against (main at 100b64e). Faults that hang a process are observed in child processes only.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

// MARK: - Helpers

/// Runs the test child in `mode` to its end (killing it after `timeout` seconds).
///
/// Waits without blocking a thread of the cooperative pool, so that a child that hangs holds up no other test.
private func runChild2(
    _ mode: String, in directory: URL, value: String, timeout: Double
) async throws -> (child: ChildProcess, end: (reason: Process.TerminationReason, status: Int32)?) {
    let child = try ChildProcess(
        "WLStorageTestChild", [mode, directory.path, "k", value], environment: ["SWIFT_BACKTRACE": "enable=no"])
    return (child, await child.exited(timeout: timeout))
}

// MARK: - 1. Retries of a failed check multiply

@Suite struct Attack2CheckRetryChainTests {
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
                    await waitUntil(timeout: 10) { failing.tallied >= round && watched.cell.externalChecks >= round },
                    "the check of outside change \(round) did not run")
            }
            // Let the checks end (each ends by scheduling its retry on the manual clock).
            try #require(await waitUntil(timeout: 10) { scheduler.pendingJobs >= 1 })
            try await Task.sleep(for: .milliseconds(200))
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

// MARK: - 2. A check of a file whose first read failed is never retried

@Suite struct Attack2FailedRereadTests {
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
                await waitUntil(timeout: 10) { failing.tallied > failedBefore }, "the outside change was not checked")
            try await Task.sleep(for: .milliseconds(200))
            failing.set(false)  // the disk recovers
            // The retries back off (100 ms, doubling): generous, for a loaded machine.
            #expect(
                await waitUntil(timeout: 30) { watched.wrappedValue == "outside" },
                "the storage still holds \(watched.wrappedValue); the file holds \"outside\"")
        }
    }
}

// MARK: - 3. A released storage of a mismatched type lives and retries forever

@Suite struct Attack2MismatchReleasedTests {
    /// Guarantees, "Several programs, one file": a storage of a file open with another type "keeps its value in
    /// memory only"; "Storages released with a write left to do": the value "is retried with the backoff ... until it
    /// is written".
    ///
    /// The mismatched storage's cell has a `RefusingBacker`, whose writes always fail. Released with a change (any
    /// set), `StorageCell.storageReleased()` finds work left and has the registry keep the cell (`keep`), urgent:
    /// it is retried every 100 ms, doubling to every 30 s, and reports `typeMismatch` each time, for the life of the
    /// process, for a write that can never succeed (even after the other storage is gone, the cell keeps its refusing
    /// backer). A program that opens such a storage per request leaks one cell and one endless retry per request.
    @Test func aMismatchedStorageReleasedWithAChangeIsLetGo() async throws {
        try await withTemporaryDirectory { directory in
            let text = fileStorage("k", in: directory, default: "text", flushInterval: nil)
            text.flush()
            weak var released: StorageCell<Int>?
            do {
                let number = fileStorage("k", in: directory, default: 7, flushInterval: nil)
                try #require(number.lastError?.code == .typeMismatch)
                number.wrappedValue = 8
                released = number.cell
            }
            #expect(
                await waitUntil(timeout: 10) { released == nil },
                "the mismatched storage's cell is still alive, retrying a write that can never succeed")
            #expect(stored(String.self, key: "k", in: directory) == "text")
        }
    }
}

// MARK: - 4. An urgent throttle stays urgent

@Suite struct Attack2UrgentThrottleTests {
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
            failing.set(false)
            // The released storage's value is retried at once, whatever the interval: promised.
            try #require(await waitUntil(timeout: 10) { stored(String.self, key: "k", in: directory) == "released" })
            try #require(await waitUntil(timeout: 10) { !second.hasPendingChanges })
            // Within an hour of that write, a change of the live storage waits for the end of its interval. Asked of
            // the throttle rather than watched on the disk: another test's `flushAll()`, in this process, may write
            // the change at any moment.
            second.wrappedValue = "one"
            second.wrappedValue = "two"
            let now = DispatchWriteScheduler.shared.now
            let delay = second.cell.state.withLock { state -> UInt64? in
                var throttle = state.throttle
                throttle.disarm()
                return throttle.arm(now: now)?.delay
            }
            #expect(!second.cell.state.withLock { $0.throttle.isUrgent }, "the cell is still urgent")
            #expect(
                (delay ?? 0) > 3_000 * 1_000_000_000,
                "a storage with an interval of an hour writes its next change in \(Double(delay ?? 0) / 1e9) s")
            second.flush()
            #expect(stored(String.self, key: "k", in: directory) == "two")
        }
    }
}

// MARK: - 5. flushAll from two backers

@Suite struct Attack2FlushAllFromBackersTests {
    /// `WLStorage.flushAll()` documents that "a storage whose backer is calling it (from `write(value:)`) is left to
    /// that write", so a backer may call it. Two such backers writing at the same time deadlock: the flushAll inside
    /// X's write (thread 1, X busy on it) waits for Y's job (`ShutdownHandling.flushEverything` keeps every cell
    /// busy on another thread, `needsFlush(from:)`; `StorageCell.flush()` then waits as a `WaitingFlush`), and the
    /// flushAll inside Y's write (thread 2) waits for X's. With VALUE `exit` it is the exit flush itself that starts
    /// the two writes side by side (the calling thread and a queue thread of `FlushRound`): the program never exits.
    @Test(arguments: ["flush", "exit"])
    func twoBackersCallingFlushAllAtOnceDoNotDeadlock(how: String) async throws {
        try await withTemporaryDirectory { directory in
            let run = try await runChild2("flushall-two-backers", in: directory, value: how, timeout: 30)
            #expect(run.end != nil, "the child hung (killed after 30 s); it printed \(run.child.lines)")
            #expect(run.end?.reason == .exit && run.end?.status == 0)
            if how == "flush" { #expect(run.child.lines.contains("done")) }
            #expect(stored(String.self, key: "x", in: directory) == "x")
            #expect(stored(String.self, key: "y", in: directory) == "y")
        }
    }
}
