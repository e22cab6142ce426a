// A batch of `flushAll` that reenters the package returns, and one that throws part way loses nothing.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// Batches of `flushAll`: one that calls `flushAll` and `flush()` from inside, and one that writes some keys and
/// then throws.
@Suite(.capturingOutput) struct StoreBatchReentryTests {
    @Test func aBatchThatCallsFlushAllAndFlushFromInsideReturns() {
        let store = HostileStore()
        let holder = Keeper()
        let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        holder.keep(a)
        store.onBatch = { [a] store, batch in
            flushAllStores([store])
            a.flush()
            for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
        }
        a.wrappedValue = 1
        b.wrappedValue = 2
        #expect(finishes(within: 60) { flushAllStores([store]) }, "flushAll from inside a batch hangs")
        #expect(store.stored("a") == "1")
        #expect(store.stored("b") == "2")
        #expect(!a.hasPendingChanges && !b.hasPendingChanges)
    }

    @Test func aBatchThatThrowsAfterWritingSomeKeysLosesNothing() {
        let store = HostileStore()
        let failing = Atomic<Bool>(true)
        store.onBatch = { store, batch in
            for (index, write) in batch.enumerated() {
                if index == 1 && failing.load(ordering: .sequentiallyConsistent) { throw HostileStore.Failure() }
                store.state.withLock { $0.values[write.key] = write.data }
            }
        }
        for key in ["a", "b", "c"] { store.writeFromOutside(key, json: "0") }
        let storages = ["a", "b", "c"].map { WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store) }
        for (index, storage) in storages.enumerated() { storage.wrappedValue = index + 1 }
        // The batch fails; the cells are then flushed one by one, which works.
        flushAllStores([store])
        failing.store(false, ordering: .sequentiallyConsistent)
        flushAllStores([store])
        for (index, key) in ["a", "b", "c"].enumerated() { #expect(store.stored(key) == "\(index + 1)") }
        #expect(storages.allSatisfy { !$0.hasPendingChanges })
        // The store's feed reports its own partial batch: not taken for another program's change. The checks the
        // report starts end before the values are looked at, however long they take.
        let checksBefore = storages.map { $0.cell.externalChecks }
        store.report(.everything)
        #expect(
            eventually(timeout: 30) {
                zip(storages, checksBefore).allSatisfy { $0.cell.externalChecks > $1 && hasNoCheckLeft($0) }
            }, "the report started no check")
        for (index, storage) in storages.enumerated() { #expect(storage.wrappedValue == index + 1) }
    }

    /// A store that cannot be read at start: `takeBatchWrite` takes no change made on the default, so `flushAll`'s
    /// batch writes nothing over the stored value.
    @Test func aStoreUnreadableAtStartGetsNothingWrittenByFlushAllsBatch() {
        let store = MemoryStore()
        store.writeFromOutside("a", json: "9")
        store.writeFromOutside("b", json: "9")
        store.failReads(true)
        let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
        store.failReads(false)
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        store.failReads(true)
        a.wrappedValue = 1  // based on the default
        b.wrappedValue = 2
        flushAllStores([store])
        flushAllStores([store])
        #expect(store.stored("a") == "9")
        #expect(store.stored("b") == "2")
        store.failReads(false)
        flushAllStores([store])
        #expect(store.stored("a") == "9")
        #expect(a.wrappedValue == 9)
    }
}
