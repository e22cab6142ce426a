import WLStorage

/// Something that happens once, awaited with no timeout of its own.
///
/// For what a task of the test runner's pool does: on a busy machine the pool (as wide as the machine has cores) may
/// start a task long after it was made, so a poll with a timeout fails a test that is only slow. A test that waits
/// here fails only by a hang, which its time limit reports.
public final class Occurrence: Sendable {
    private let state = Lock<(happened: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public init() {}

    /// Marks it happened and resumes every waiter. Calling it again does nothing.
    public func happen() {
        let waiters = state.withLock { state in
            state.happened = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether it happened.
    public var hasHappened: Bool { state.withLock { $0.happened } }

    /// Returns once it happened.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let happened = state.withLock { state in
                if !state.happened { state.waiters.append(continuation) }
                return state.happened
            }
            if happened { continuation.resume() }
        }
    }
}
