import Dispatch
import Synchronization

@testable import WLStorage

struct BackerFailure: Error, Equatable {}

/// A backer in memory that records every write, and can be told to fail or to block; its first `failingReads` reads
/// throw.
final class RecordingBacker<T: Codable & Sendable>: WLStorageBacker, Sendable {
    private struct State {
        var stored: T?
        var writes: [T] = []
        var failuresLeft = 0
        var failedWrites = 0
        var readFailure = false
        var failingReads = 0
        var reads = 0
    }

    let key: String
    private let state: Lock<State>
    /// When set, each write signals `started` and waits for `proceed` before it stores anything.
    private let gate: (started: DispatchSemaphore, proceed: DispatchSemaphore)?

    init(key: String = "recorded", stored: T? = nil, blocking: Bool = false, failingReads: Int = 0) {
        ReportedErrors.install()
        self.key = key
        self.state = Lock(State(stored: stored, failingReads: failingReads))
        self.gate = blocking ? (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)) : nil
    }

    func read(defaultValueClosure: () -> T) throws -> T {
        let (stored, fails) = state.withLock { state in
            state.reads += 1
            guard state.failingReads == 0 else {
                state.failingReads -= 1
                return (state.stored, true)
            }
            return (state.stored, state.readFailure)
        }
        if fails { throw BackerFailure() }
        return stored ?? defaultValueClosure()
    }

    func write(value: T) throws {
        if let gate {
            gate.started.signal()
            // Bounded: a test that fails before it releases the write must not hang every later `flushAll()` of the
            // test process, which waits for this write.
            _ = gate.proceed.wait(timeout: .now() + 60)
        }
        try state.withLock { state in
            if state.failuresLeft > 0 {
                state.failuresLeft -= 1
                state.failedWrites += 1
                throw BackerFailure()
            }
            state.stored = value
            state.writes.append(value)
        }
    }

    var writes: [T] { state.withLock { $0.writes } }
    /// Calls of `read(defaultValueClosure:)`, failed or not.
    var reads: Int { state.withLock { $0.reads } }
    var stored: T? { state.withLock { $0.stored } }
    /// How many writes failed as told.
    var failedWrites: Int { state.withLock { $0.failedWrites } }

    func failNextWrites(_ count: Int) { state.withLock { $0.failuresLeft = count } }
    func failReads() { state.withLock { $0.readFailure = true } }

    /// Waits until a blocked write has started. Returns `false` after `timeout` seconds.
    func waitForWriteToStart(timeout: Double = 30) -> Bool {
        gate!.started.wait(timeout: .now() + timeout) == .success
    }

    /// Lets one blocked write go on.
    func releaseWrite() { gate!.proceed.signal() }
}
