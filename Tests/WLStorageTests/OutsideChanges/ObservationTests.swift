import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

private struct Settings {
    @WLStorage var name: String

    init(directory: URL) {
        _name = fileStorage("name", in: directory, default: "anonymous", flushInterval: nil)
    }
}

/// Counts the values a subscription delivered, and remembers the last.
final class Received<T: Sendable>: Sendable {
    private let values = Lock<[T]>([])
    func append(_ value: T) { values.withLock { $0.append(value) } }
    var all: [T] { values.withLock { $0 } }
}

// The time limit catches a hang; it counts the wait for each test's turn too (see TestThreads.swift).
@Suite(.capturingOutput, .timeLimit(.minutes(30))) struct ObservationTests {
    @Test func observationTrackingFiresOnAChangeFromAnotherThread() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let fired = Atomic<Bool>(false)
        let seen = withObservationTracking {
            storage.wrappedValue
        } onChange: {
            fired.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(seen == 0)
        Thread.detachNewThread { storage.wrappedValue = 1 }
        let didFire = eventually { fired.load(ordering: .sequentiallyConsistent) }
        #expect(didFire)
    }

    @Test func theProjectedValueIsTheStorage() throws {
        try withTemporaryDirectory { directory in
            let settings = Settings(directory: directory)
            settings.name = "Ada"
            settings.$name.flush()
            #expect(stored(String.self, key: "name", in: directory) == "Ada")
            #expect(settings.$name.key == "name")
        }
    }

    @Test func valuesYieldsTheCurrentValueThenEveryChange() async throws {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 5))
        var iterator = storage.values.makeAsyncIterator()
        #expect(await iterator.next() == 5)
        storage.wrappedValue = 6
        #expect(await iterator.next() == 6)
        storage.wrappedValue = 7
        #expect(await iterator.next() == 7)
    }

    @Test func aSlowConsumerGetsTheLatestValueNotABacklog() async throws {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        var iterator = storage.values.makeAsyncIterator()
        #expect(await iterator.next() == 0)
        for value in 1...1_000 { storage.wrappedValue = value }
        #expect(await iterator.next() == 1_000)
        storage.wrappedValue = 1_001
        #expect(await iterator.next() == 1_001)
    }

    @Test func cancellingTheConsumerLeavesNothingBehind() async throws {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let started = Occurrence()
        let consumer = Task {
            var count = 0
            for await _ in storage.values {
                started.happen()
                count += 1
            }
            return count
        }
        // A task of the pool, which a busy machine may start late: waited for, not polled.
        await started.wait()
        #expect(storage.cell.listenerCount == 1)
        consumer.cancel()
        #expect(await consumer.value >= 1)
        let cleanedUp = await waitUntil { storage.cell.listenerCount == 0 }
        #expect(cleanedUp)
    }

    @Test func onChangeDeliversEveryChangeInOrderOnTheChosenQueue() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let queue = DispatchQueue(label: "test.delivery")
        let marker = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: marker, value: true)
        let received = Received<Int>()
        let onQueue = Atomic<Bool>(true)
        let subscription = storage.onChange(queue: queue) { value in
            if DispatchQueue.getSpecific(key: marker) != true {
                onQueue.store(false, ordering: .sequentiallyConsistent)
            }
            received.append(value)
        }
        for value in 1...100 { storage.wrappedValue = value }
        let all = eventually { received.all.count == 100 }
        #expect(all)
        #expect(received.all == Array(1...100))
        let alwaysOnQueue = onQueue.load(ordering: .sequentiallyConsistent)
        #expect(alwaysOnQueue)

        subscription.cancel()
        storage.wrappedValue = 101
        queue.sync {}
        #expect(received.all.last == 100)
        #expect(storage.cell.listenerCount == 0)
    }

    @Test func aDroppedSubscriptionStopsItsHandler() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        do {
            let subscription = storage.onChange(queue: .global()) { _ in }
            #expect(storage.cell.listenerCount == 1)
            _ = subscription
        }
        #expect(storage.cell.listenerCount == 0)
    }
}
