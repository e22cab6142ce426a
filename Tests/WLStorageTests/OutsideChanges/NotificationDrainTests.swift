// A set delivers at most one backlog of other threads' notifications on its own thread, not for seconds.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

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
