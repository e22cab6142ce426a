// No user code runs and no user object is released under a lock of the package: values, backers and observers that call
// back into it.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

/// Runs the test child in `mode` to its end.
private func runChildOfKeyK(
    _ mode: String, in directory: URL, key: String = "k", value: String = "value", timeout: Double = 60
) throws -> (child: ChildProcess, reason: Process.TerminationReason, status: Int32) {
    let child = try ChildProcess(
        "WLStorageTestChild", [mode, directory.path, key, value], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let end = try #require(child.waitForExit(timeout: timeout), "the child did not end")
    return (child, end.reason, end.status)
}

/// Runs the test child in `mode` to its end (killing it after `timeout` seconds).
///
/// Waits without blocking a thread of the cooperative pool, so that a child that hangs holds up no other test.
private func runChildWithoutBlocking(
    _ mode: String, in directory: URL, value: String, timeout: Double
) async throws -> (child: ChildProcess, end: (reason: Process.TerminationReason, status: Int32)?) {
    let child = try ChildProcess(
        "WLStorageTestChild", [mode, directory.path, "k", value], environment: ["SWIFT_BACKTRACE": "enable=no"])
    return (child, await child.exited(timeout: timeout))
}

/// A value is released outside every lock: its `deinit` may read and set the very storage.
private final class Touchy: Codable, Sendable {
    static let target = Lock<WLStorage<Touchy>?>(nil)
    static let touched = Atomic<Int>(0)
    let n: Int
    init(_ n: Int) { self.n = n }
    deinit {
        guard Self.touched.add(1, ordering: .relaxed).newValue < 50 else { return }
        let storage = Self.target.withLock { $0 }
        if let storage {
            _ = storage.wrappedValue
            _ = storage.hasPendingChanges
            if n == 1 { storage.wrappedValue = Touchy(-1) }
            storage.flush()
        }
    }
}

@Suite(.capturingOutput) struct UserObjectsReleasedOutsideLocksTests {
    /// "None of your objects is released under [a lock of the package]." A value that is (or holds) a class is
    /// user code when it goes: adopting another program's value, or going back to the default after a removal,
    /// releases the old value inside the cell's lock, and a deinit that reads the storage crashes the program
    /// ("Recursive call to lock Mutex"), losing every pending value in it.
    @Test(arguments: ["change", "remove"])
    func anAdoptedOutsideChangeReleasesTheOldValueOutsideTheLock(how: String) throws {
        try withTemporaryDirectory { directory in
            let run = try runChildOfKeyK("class-value-deinit", in: directory, value: how)
            #expect(run.reason == .exit, "the child crashed: \(run.reason) \(run.status)")
            #expect(run.child.lines == ["adopted"])
        }
    }
}

@Suite(.capturingOutput) struct StorageReleasedInsideItsBackerTests {
    /// A storage released from inside its own backer's write "keeps its pending value as above": retried with the
    /// backoff (at least 100 ms, doubling up to 30 s) whatever its flush interval. With an interval of an hour, the
    /// value set from inside the write waits an hour (only the exit flush writes it).
    @Test(arguments: ["backer-release-0", "backer-release-nil-flush", "backer-release-3600"])
    func aStorageReleasedFromInsideItsOwnBackerWritesWhatWasSetThereWithinSeconds(mode: String) throws {
        try withTemporaryDirectory { directory in
            let run = try runChildOfKeyK(mode, in: directory)
            #expect(run.reason == .exit && run.status == 0, "the child ended by \(run.reason) \(run.status)")
            #expect(run.child.lines == ["written"])
        }
    }
}

@Suite(.capturingOutput) struct FlushFromAnObserverTests {
    /// An observer's `onChange` for another program's change runs while the cell's check job is still marked busy on
    /// that thread, so a `flush()` there is taken for a call from inside the backer: it returns without writing and
    /// reports `reentrantCall`, "called from inside this storage's own backer", which it was not.
    @Test func aFlushFromAnObserverOfAnOutsideChangeIsNotTakenForABackerCall() throws {
        try withTemporaryDirectory { directory in
            let observed = fileStorage("k", in: directory, default: "", flushInterval: nil)
            observed.flush()
            let errors = Lock<[String]>([])
            let done = DispatchSemaphore(value: 0)
            let other = fileStorage("other", in: directory, default: "", flushInterval: nil)
            withObservationTracking {
                _ = observed.wrappedValue
            } onChange: {
                // Record what the app saw, in another storage, and make it durable.
                other.wrappedValue = "saw a change"
                other.flush()
                observed.flush()
                if let error = observed.lastError { errors.withLock { $0.append(error.code.name) } }
                done.signal()
            }
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            try #require(done.wait(timeout: .now() + 60) == .success)
            #expect(errors.withLock { $0 } == [], "flush() from an observer reported \(errors.withLock { $0 })")
            #expect(stored(String.self, key: "other", in: directory) == "saw a change")
        }
    }
}

@Suite struct FlushAllFromBackersTests {
    /// `WLStorageSystem.flushAll()` documents that "a storage whose backer is calling it (from `write(value:)`) is left to
    /// that write", so a backer may call it. Two such backers writing at the same time deadlock: the flushAll inside
    /// X's write (thread 1, X busy on it) waits for Y's job (`ShutdownHandling.flushEverything` keeps every cell
    /// busy on another thread, `needsFlush(from:)`; `StorageCell.flush()` then waits as a `WaitingFlush`), and the
    /// flushAll inside Y's write (thread 2) waits for X's. With VALUE `exit` it is the exit flush itself that starts
    /// the two writes side by side (the calling thread and a queue thread of `FlushRound`): the program never exits.
    @Test(arguments: ["flush", "exit"])
    func twoBackersCallingFlushAllAtOnceDoNotDeadlock(how: String) async throws {
        try await withTemporaryDirectory { directory in
            let run = try await runChildWithoutBlocking("flushall-two-backers", in: directory, value: how, timeout: 30)
            #expect(run.end != nil, "the child hung (killed after 30 s); it printed \(run.child.lines)")
            #expect(run.end?.reason == .exit && run.end?.status == 0)
            if how == "flush" { #expect(run.child.lines.contains("done")) }
            #expect(stored(String.self, key: "x", in: directory) == "x")
            #expect(stored(String.self, key: "y", in: directory) == "y")
        }
    }
}

@Suite(.capturingOutput, .serialized) struct ValueDeinitOutsideLocksTests {
    @Test func valuesWhoseDeinitTouchesTheStorageAreReleasedOutsideTheLock() {
        let store = MemoryStore()
        store.writeFromOutside("t", json: #"{"n":1}"#)
        let storage = WLStorage(key: "t", defaultValue: Touchy(0), flushInterval: nil, store: store)
        Touchy.target.withLock { $0 = storage }
        defer {
            let storage = Touchy.target.withLock { target in
                defer { target = nil }
                return target
            }
            _ = storage
        }
        storage.wrappedValue = Touchy(2)  // releases the value read, whose deinit sets the storage
        #expect(storage.wrappedValue.n == -1)
        storage.flush()
        #expect(store.stored("t") == #"{"n":-1}"#)
        store.writeFromOutside("t", json: #"{"n":3}"#)  // adopted: releases the value in memory
        #expect(eventually { storage.wrappedValue.n == 3 })
        store.removeFromOutside("t")  // back to the default: releases the value in memory
        #expect(eventually { storage.wrappedValue.n == 0 })
        #expect(Touchy.touched.load(ordering: .relaxed) > 0)
    }
}
