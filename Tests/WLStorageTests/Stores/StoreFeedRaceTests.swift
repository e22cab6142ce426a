// The feed racing a storage's creation and release: its changes are adopted, and the feed ends once.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// The feed racing the storage's creation, and the storage's release.
@Suite(.capturingOutput) struct StoreFeedRaceTests {
    /// Another program's change lands right after the initial read, before the cell is registered: the event finds
    /// no cell, and the event count makes the new cell check once more.
    @Test func aChangeReportedBetweenTheInitialReadAndTheCellIsAdopted() {
        let store = HostileStore()
        store.writeFromOutside("k", json: "1")
        let once = Atomic<Bool>(false)
        store.onRead = { store, key in
            guard !once.exchange(true, ordering: .sequentiallyConsistent) else { return }
            // The read returns "1" below; the change reported here comes after it in the store's order.
            Thread.detachNewThread {
                usleep(2_000)
                store.writeFromOutside(key, json: "2")
            }
            usleep(10_000)
        }
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        #expect(eventually { storage.wrappedValue == 2 })
    }

    @Test func anObservationCancelledFromManyThreadsAtOnceStopsOnce() {
        for _ in 0..<200 {
            let stops = Atomic<Int>(0)
            let observation = WLStorageSubscription { stops.add(1, ordering: .relaxed) }
            DispatchQueue.concurrentPerform(iterations: 4) { _ in observation.cancel() }
            #expect(stops.load(ordering: .relaxed) == 1)
        }
    }

    /// A storage released from inside its own `onChange` handler while the feed reports changes, and the feed's
    /// observation released by the last storage.
    @Test func aStorageReleasedFromItsOnChangeWhileTheFeedFiresEndsTheFeed() {
        let store = HostileStore()
        let keeper = Keeper()
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        keeper.keep(storage)
        let handled = Atomic<Bool>(false)
        let handler = storage.onChange(queue: .global()) { _ in
            keeper.dropAll()
            handled.store(true, ordering: .sequentiallyConsistent)
        }
        _ = handler
        let stop = Atomic<Bool>(false)
        Thread.detachNewThread {
            var n = 0
            while !stop.load(ordering: .sequentiallyConsistent) {
                n += 1
                store.writeFromOutside("k", json: "\(n)")
                store.report(.everything)
            }
        }
        _ = consume storage
        #expect(eventually { handled.load(ordering: .sequentiallyConsistent) })
        handler.cancel()
        #expect(eventually { store.feedCount == 0 })
        stop.store(true, ordering: .sequentiallyConsistent)
    }

    /// Storages opened and released on several threads while the feed reports every key in a loop and `flushAll`
    /// runs: nothing crashes, no value is lost, and the feed ends with the last storage.
    @Test func releasesFlushAllAndAStormOfEverythingEndWithTheFeedCancelled() {
        let store = HostileStore()
        let stop = Atomic<Bool>(false)
        let storms = [
            startThread {
                while !stop.load(ordering: .sequentiallyConsistent) { store.report(.everything) }
            },
            startThread {
                while !stop.load(ordering: .sequentiallyConsistent) {
                    flushAllStores([store])
                    usleep(1_000)
                }
            },
        ]
        let finished = finishes(within: 30) {
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for round in 0..<100 {
                    let storage = WLStorage(
                        key: "k\(thread)", defaultValue: -1, flushInterval: round % 2 == 0 ? nil : 0, store: store)
                    storage.wrappedValue = round
                    if round % 3 == 0 { storage.flush() }
                }
            }
        }
        stop.store(true, ordering: .sequentiallyConsistent)
        #expect(storms.allSatisfy { $0.wait(timeout: .now() + 60) == .success })
        #expect(finished)
        for thread in 0..<4 { #expect(eventually { store.stored("k\(thread)") == "99" }) }
        #expect(eventually { store.feedCount == 0 })
    }
}
