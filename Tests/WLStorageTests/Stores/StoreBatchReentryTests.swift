// flushAll's batches: a batch that throws, reenters the package or releases storages loses nothing and does not hang.
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

/// A batch that a store wrote in part: what it says it stored counts as written.
@Suite(.capturingOutput) struct StoreBatchPartTests {
    @Test func aBatchThatSaysItStoredItsFirstWritesLeavesOnlyTheOthersPending() {
        let store = HostileStore()
        let stored = Lock<[String]>([])
        let failing = Atomic<Bool>(true)
        store.onBatch = { store, batch in
            guard failing.load(ordering: .sequentiallyConsistent) else {
                for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
                return
            }
            // The first two writes are stored, then the store fails and says so.
            for write in batch.prefix(2) {
                store.state.withLock { $0.values[write.key] = write.data }
                stored.withLock { $0.append(write.key) }
            }
            var error = WLStorageError(code: .writeFailed, message: "the deadline passed after two writes")
            error.storedWrites = 2
            throw error
        }
        for key in ["a", "b", "c"] { store.writeFromOutside(key, json: "0") }
        let storages = ["a", "b", "c"].map { WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store) }
        for (index, storage) in storages.enumerated() { storage.wrappedValue = index + 1 }
        flushAllStores([store])
        let written = stored.withLock { $0 }
        #expect(written.count == 2)
        for (key, storage) in zip(["a", "b", "c"], storages) {
            #expect(storage.hasPendingChanges == !written.contains(key), "\(key)")
        }
        failing.store(false, ordering: .sequentiallyConsistent)
        flushAllStores([store])
        for (index, key) in ["a", "b", "c"].enumerated() { #expect(store.stored(key) == "\(index + 1)") }
        #expect(storages.allSatisfy { !$0.hasPendingChanges })
    }
}

@Suite(.capturingOutput) struct StoreReentryTests {
    /// One value of a batch that cannot be encoded fails alone; the others are written.
    @Test func aBatchWithAnUnencodableValueWritesTheOthers() {
        let store = MemoryStore()
        let good = WLStorage(key: "good", defaultValue: 0.0, flushInterval: nil, store: store)
        let bad = WLStorage(key: "bad", defaultValue: 0.0, flushInterval: nil, store: store)
        let other = WLStorage(key: "other", defaultValue: 0.0, flushInterval: nil, store: store)
        flushAllStores([store])
        good.wrappedValue = 1.5
        bad.wrappedValue = .nan
        other.wrappedValue = 2.5
        flushAllStores([store])
        #expect(store.stored("good") == "1.5")
        #expect(store.stored("other") == "2.5")
        #expect(bad.hasPendingChanges)
        #expect(bad.lastError?.code == .encodingFailed)
    }

    /// A storage of the same key opened (and changed, and released) from inside the store's read of the first
    /// storage's initializer: the first joins the cell the nested one made.
    @Test func aStorageOfTheSameKeyOpenedInsideTheInitialReadIsJoined() {
        let store = HostileStore()
        let once = Atomic<Bool>(false)
        let keeper = Keeper()
        store.onRead = { store, key in
            guard !once.exchange(true, ordering: .sequentiallyConsistent) else { return }
            let nested = WLStorage(key: key, defaultValue: 0, flushInterval: nil, store: store)
            nested.wrappedValue = 5
            keeper.keep(nested)
        }
        let finished = finishes(within: 60) {
            let outer = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
            #expect(outer.wrappedValue == 5)
            outer.wrappedValue = 6
            keeper.dropAll()
            outer.flush()
        }
        #expect(finished)
        #expect(store.stored("k") == "6")
        #expect(eventually { store.feedCount == 0 })
    }

    /// A custom backer whose feed fires from inside `observeChanges` (before the cell exists), and whose
    /// observation's cancellation calls `flushAll` and opens a storage of the same backer.
    @Test func aCustomBackersFeedFiringEarlyAndCancellingIntoTheStorageIsHarmless() {
        final class EagerBacker: WLStorageObservableBacker, Sendable {
            let key = "eager"
            let value = Lock<Int?>(1)
            let cancels = Atomic<Int>(0)
            let nested = Lock<WLStorage<Int>?>(nil)
            func read(defaultValueClosure: () -> Int) -> Int { value.withLock { $0 } ?? defaultValueClosure() }
            func write(value: Int) { self.value.withLock { $0 = value } }
            func observeChanges(_ changed: @escaping @Sendable () -> Void) -> WLStorageSubscription {
                value.withLock { $0 = 2 }  // changed between the start of the feed and the first read
                changed()
                changed()
                return WLStorageSubscription { [self] in
                    guard cancels.add(1, ordering: .relaxed).newValue == 1 else { return }
                    flushAllStores([])  // a custom backer has no store: this walks every cell and flushes none
                    let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: self)
                    storage.wrappedValue = 9
                    storage.flush()
                }
            }
        }
        ReportedErrors.install()
        let backer = EagerBacker()
        let finished = finishes(within: 60) {
            let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
            #expect(storage.wrappedValue == 2)
            storage.wrappedValue = 3
        }
        #expect(finished)
        #expect(eventually { backer.cancels.load(ordering: .relaxed) >= 1 })
        #expect(eventually { backer.value.withLock { $0 } == 9 })
    }
}

@Suite(.capturingOutput) struct StoreBatchEncodeTests {
    /// A value whose encoding (run by `takeBatchWrite` with the cell busy on the flushing thread) calls `flushAll` and
    /// flushes its own storage: both return, and every value is written.
    @Test func aValueWhoseEncodingFlushesEverythingInsideABatchDoesNotHang() {
        struct Loud: Codable, Sendable {
            var n: Int
            static let storage = Lock<WLStorage<Loud>?>(nil)
            static let store = MemoryStore()
            func encode(to encoder: any Encoder) throws {
                if n > 0 {
                    flushAllStores([Self.store])
                    Self.storage.withLock { $0 }?.flush()
                }
                var container = encoder.singleValueContainer()
                try container.encode(n)
            }
            init(n: Int) { self.n = n }
            init(from decoder: any Decoder) throws { n = try decoder.singleValueContainer().decode(Int.self) }
        }
        let store = Loud.store
        let loud = WLStorage(key: "loud", defaultValue: Loud(n: 0), flushInterval: nil, store: store)
        let quiet = WLStorage(key: "quiet", defaultValue: 0, flushInterval: nil, store: store)
        Loud.storage.withLock { $0 = loud }
        defer {
            let storage = Loud.storage.withLock { target in
                defer { target = nil }
                return target
            }
            _ = storage
        }
        loud.wrappedValue = Loud(n: 1)
        quiet.wrappedValue = 2
        #expect(finishes(within: 60) { flushAllStores([store]) })
        #expect(store.stored("loud") == "1")
        #expect(store.stored("quiet") == "2")
    }
}

@Suite(.capturingOutput) struct StoreBatchReleaseTests {
    /// The last storage of a batched key released from inside the batch (on the flushing thread, whose job holds the
    /// cell): its flush sees its own job and returns, the cell is kept until the batch ends, and then let go with the
    /// feed.
    @Test func theLastStorageOfABatchedKeyReleasedInsideTheBatchIsWrittenAndLetGo() {
        let store = HostileStore()
        let keeper = Keeper()
        weak var cell: StorageCell<Int>?
        do {
            let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
            cell = a.cell
            keeper.keep(a)
            a.wrappedValue = 1
        }
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        b.wrappedValue = 2
        store.onBatch = { store, batch in
            keeper.dropAll()
            for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
        }
        #expect(finishes(within: 60) { flushAllStores([store]) })
        keeper.dropAll()  // when another test's flushAll wrote "a" alone, before the batch
        #expect(store.stored("a") == "1")
        #expect(store.stored("b") == "2")
        #expect(eventually { cell == nil })
        #expect(eventually { store.feedCount == 1 })
        _ = b
    }
}

/// What a batch of `flushAll` leaves to each storage's own flush: the changes made while the batch was written.
@Suite(.capturingOutput) struct StoreBatchLeftoverTests {
    /// A change made to a batched key while the store writes the batch (which holds the change before it) is written
    /// by the same `flushAll`, after the batch.
    @Test func aChangeMadeWhileItsBatchIsWrittenIsWrittenByTheSameFlushAll() {
        let store = HostileStore()
        let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        // The change made from inside the batch, when it holds "a": 0 for none yet.
        let madeInside = Atomic<Int>(0)
        let attempt = Atomic<Int>(0)
        store.onBatch = { [a] store, batch in
            for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
            guard batch.contains(where: { $0.key == "a" }) else { return }
            let change = -attempt.load(ordering: .sequentiallyConsistent)
            a.wrappedValue = change
            madeInside.store(change, ordering: .sequentiallyConsistent)
        }
        defer { store.onBatch = nil }
        // Another test's flushAll of every storage may write "a" and "b" one at a time between the sets: then there
        // is no batch of them, and the test tries again.
        for round in 1...5 {
            attempt.store(round, ordering: .sequentiallyConsistent)
            a.wrappedValue = round
            b.wrappedValue = round
            #expect(finishes(within: 60) { flushAllStores([store]) })
            let change = madeInside.load(ordering: .sequentiallyConsistent)
            guard change != 0 else { continue }
            #expect(store.stored("a") == "\(change)")
            #expect(!a.hasPendingChanges && !b.hasPendingChanges)
            return
        }
        Issue.record("the two keys were never written in one batch")
    }
}
