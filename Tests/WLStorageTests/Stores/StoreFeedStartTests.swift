// A storage of the same store opened from inside `observeChanges` does not hang.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// "No user code runs under a package lock": a store's `observeChanges` is user code, and it may open a storage of
/// its own store (to keep its cursor, say).
///
/// `StoreFeeds.use` puts a placeholder feed in its table and calls `observeChanges` with the placeholder's
/// `started` group entered; every other `use` of that identity waits on the group. A storage of the same store
/// opened from inside `observeChanges` (on the thread that is starting the feed) waits for a group that only its own
/// thread can leave: the program hangs in the first storage's initializer.
@Suite(.capturingOutput) struct StoreFeedStartTests {
    @Test func aStorageOfTheSameStoreOpenedInsideObserveChangesDoesNotHang() {
        let store = HostileStore()
        let keeper = Keeper()
        store.onObserve = { store in
            // The store keeps the cursor of its feed in a storage of its own.
            keeper.keep(WLStorage(key: "cursor", defaultValue: 0, flushInterval: nil, store: store))
        }
        let keeperOfFirst = Keeper()
        let finished = finishes(within: 60) {
            keeperOfFirst.keep(WLStorage(key: "value", defaultValue: 1, flushInterval: nil, store: store))
        }
        #expect(finished, "the storage's initializer hangs: the nested one waits for the feed its own thread starts")
        guard finished else { return }
        keeper.dropAll()
        keeperOfFirst.dropAll()
        #expect(eventually { store.feedCount == 0 })
    }
}
