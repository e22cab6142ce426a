import Synchronization

@testable import WLStorage

/// A clock that moves only when the test says so, and runs scheduled work on the test's thread.
final class ManualScheduler: WriteScheduler {
    private struct Job {
        let due: UInt64
        let order: Int
        let work: @Sendable () -> Void
    }

    private struct State {
        var now: UInt64 = 1_000_000_000_000
        var order = 0
        var jobs: [Job] = []
    }

    private let state = Lock(State())

    var now: UInt64 {
        state.withLock { $0.now }
    }

    func schedule(after delay: UInt64, _ work: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.jobs.append(Job(due: state.now + delay, order: state.order, work: work))
            state.order += 1
        }
    }

    /// The number of jobs not run yet.
    var pendingJobs: Int {
        state.withLock { $0.jobs.count }
    }

    /// The delays from now of the jobs not run yet, in nanoseconds.
    var pendingDelays: [UInt64] {
        state.withLock { state in state.jobs.map { $0.due - state.now }.sorted() }
    }

    /// Moves the clock forward by `duration` and runs every job that falls due, in order of time.
    func advance(by duration: Duration = .zero) {
        let (seconds, attoseconds) = duration.components
        let target = state.withLock { state in
            state.now + UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        }
        while true {
            let next = state.withLock { state -> Job? in
                guard
                    let index = state.jobs.indices
                        .filter({ state.jobs[$0].due <= target })
                        .min(by: {
                            (state.jobs[$0].due, state.jobs[$0].order) < (state.jobs[$1].due, state.jobs[$1].order)
                        })
                else {
                    state.now = target
                    return nil
                }
                let job = state.jobs.remove(at: index)
                state.now = max(state.now, job.due)
                return job
            }
            guard let next else { return }
            next.work()
        }
    }
}
