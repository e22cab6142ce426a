// A feed called from inside every call of its store neither crashes nor loses a change, and nothing hangs.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A feed called synchronously from inside `observeChanges`, `read`, `write` and a batch: no lock is held there, so
/// nothing is recursive, and every change still lands.
@Suite(.capturingOutput) struct StoreReentrantFeedTests {
    @Test func aFeedCalledFromInsideEveryCallOfTheStoreNeitherCrashesNorLosesAChange() {
        let store = HostileStore()
        store.onObserve = { store in
            store.report(.everything)
            store.report(.key("a"))
        }
        store.onRead = { store, key in store.report(.key(key)) }
        store.onWrite = { store, key in store.report(.key(key)) }
        store.onBatch = { store, batch in
            store.report(.everything)
            for write in batch { try store.write(key: write.key, data: write.data) }
            store.report(.everything)
        }
        store.writeFromOutside("a", json: "1")
        let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        #expect(a.wrappedValue == 1)
        a.wrappedValue = 10
        b.wrappedValue = 20
        flushAllStores([store])
        #expect(store.stored("a") == "10")
        #expect(store.stored("b") == "20")
        store.writeFromOutside("b", json: "21")
        #expect(eventually { b.wrappedValue == 21 })
        #expect(a.wrappedValue == 10)
    }

    /// A storage opened and released from inside the store's `write` (on the cell's own job) and from inside a
    /// batch: the nested flush sees its own thread's job and returns.
    @Test func storagesOpenedAndReleasedInsideWriteAndBatchDoNotHang() {
        let store = HostileStore()
        store.onWrite = { store, key in
            let nested = WLStorage(key: key, defaultValue: -1, flushInterval: nil, store: store)
            nested.flush()
            _ = nested.wrappedValue
        }
        store.onBatch = { store, batch in
            for write in batch {
                let nested = WLStorage(key: write.key, defaultValue: -1, flushInterval: nil, store: store)
                nested.flush()
                store.state.withLock { $0.values[write.key] = write.data }
            }
        }
        let finished = finishes(within: 60) {
            let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
            let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
            a.wrappedValue = 1
            a.flush()
            a.wrappedValue = 2
            b.wrappedValue = 3
            flushAllStores([store])
        }
        #expect(finished)
        #expect(store.stored("a") == "2")
        #expect(store.stored("b") == "3")
        #expect(eventually { store.feedCount == 0 })
    }
}
