// A store's batch, initial read and feed reentered by the package: an unencodable value fails alone, nothing hangs.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

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
