// `onChange(queue: nil)`: the handler runs on the thread that delivers the change, with no hop to a queue; one call at
// a time, in the order of the changes, and with no lock of the package held.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// The values a handler received, and on which threads.
private final class Deliveries: Sendable {
    private let received = Lock<[(value: Int, thread: pthread_t)]>([])
    /// Handlers running at this moment, and the most ever seen at once.
    private let running = Atomic<Int>(0)
    private let mostAtOnce = Atomic<Int>(0)

    func record(_ value: Int, during body: () -> Void = {}) {
        let now = running.add(1, ordering: .sequentiallyConsistent).newValue
        mostAtOnce.max(now, ordering: .sequentiallyConsistent)
        received.withLock { $0.append((value, pthread_self())) }
        body()
        running.subtract(1, ordering: .sequentiallyConsistent)
    }

    var values: [Int] { received.withLock { $0.map(\.value) } }
    var threads: [pthread_t] { received.withLock { $0.map(\.thread) } }
    var mostHandlersAtOnce: Int { mostAtOnce.load(ordering: .sequentiallyConsistent) }
}

@Suite(.capturingOutput) struct HandlerWithoutQueueTests {
    /// A set of this process calls the handler on the setting thread, before the set returns.
    @Test func aSetCallsTheHandlerOnItsOwnThreadBeforeItReturns() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let deliveries = Deliveries()
        let subscription = storage.onChange(queue: nil) { deliveries.record($0) }
        defer { subscription.cancel() }
        for value in 1...3 {
            storage.wrappedValue = value
            #expect(deliveries.values == Array(1...value))
        }
        #expect(deliveries.threads.allSatisfy { pthread_equal($0, pthread_self()) != 0 })
    }

    /// Threads setting at once: each handler call ends before the next starts, each thread's changes arrive in the
    /// order it made them, and the last value delivered is the storage's.
    @Test func threadsSettingAtOnceGetOneCallAtATimeInTheOrderOfTheChanges() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let deliveries = Deliveries()
        // Each call takes a moment, so that the threads' sets meet a call in progress.
        let subscription = storage.onChange(queue: nil) { value in
            deliveries.record(value) { usleep(20) }
        }
        defer { subscription.cancel() }
        let threads = 4
        let setsPerThread = 300
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 1...setsPerThread { storage.wrappedValue = thread * 10_000 + index }
        }
        let final = storage.wrappedValue
        #expect(
            eventually(timeout: 30) { deliveries.values.last == final },
            "last delivered: \(deliveries.values.last ?? -1)")
        #expect(deliveries.mostHandlersAtOnce == 1)
        let values = deliveries.values
        for thread in 0..<threads {
            let own = values.filter { $0 / 10_000 == thread }
            let inOrder = zip(own, own.dropFirst()).allSatisfy { $0 < $1 }
            #expect(inOrder, "thread \(thread)'s changes out of order or delivered twice")
        }
    }

    /// A handler may set the storage again, flush it and cancel its own subscription: nothing deadlocks, the set it
    /// made is delivered next, and it is written.
    @Test func aHandlerSetsFlushesAndCancelsItsOwnSubscription() throws {
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
        let deliveries = Deliveries()
        let subscription = Lock<WLStorageSubscription?>(nil)
        subscription.withLock { held in
            held = storage.onChange(queue: nil) { value in
                deliveries.record(value)
                if value == 1 {
                    storage.wrappedValue = 2
                    storage.flush()
                } else {
                    let own = subscription.withLock { held in
                        defer { held = nil }
                        return held
                    }
                    own?.cancel()
                }
            }
        }
        let returned = finishes(within: 30) { storage.wrappedValue = 1 }
        try #require(returned, "the set did not return")
        #expect(eventually(timeout: 30) { deliveries.values == [1, 2] }, "delivered: \(deliveries.values)")
        #expect(eventually(timeout: 30) { storage.cell.listenerCount == 0 })
        #expect(backer.stored == 2)
        storage.wrappedValue = 3
        #expect(deliveries.values == [1, 2])
    }

    /// A change another program made reaches the handler on a thread of the package, and the storage holds it by then.
    @Test func aChangeMadeElsewhereCallsTheHandlerOnAThreadOfThePackage() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("watched", in: directory, default: 0, flushInterval: nil)
            storage.flush()
            let seen = Lock<[Int]>([])
            let testThread = pthread_self()
            let subscription = storage.onChange(queue: nil) { value in
                let elsewhere = pthread_equal(pthread_self(), testThread) == 0
                seen.withLock { $0.append(storage.wrappedValue == value && elsewhere ? value : -value) }
            }
            defer { subscription.cancel() }
            try replaceFromOutside(directory.appendingPathComponent("watched"), with: "7")
            #expect(eventually(timeout: 30) { seen.withLock { $0 } == [7] }, "seen: \(seen.withLock { $0 })")
        }
    }
}
