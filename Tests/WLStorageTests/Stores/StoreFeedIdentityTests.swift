// A store whose identity changed meanwhile has its feed ended with the last storage, and its changes still land.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// "The feed is started by the first storage and cancelled with the last" (`StoreFeeds`).
///
/// The store's `identity` is read anew at each use: `StoreFeeds.use` reads it, the registry keys the cell by
/// `StorageCell.storeKey` (which reads it again on every access), and the cell's `deinit` releases the feed under
/// whatever it says then. A store whose identity is computed from state that changes (the connection it is on, a
/// path resolved later) has its feed started under one identity and released under another: the feed is never
/// cancelled, and a storage opened after the change gets a cell of its own, a second value for the same key.
@Suite(.capturingOutput) struct StoreFeedIdentityTests {
    @Test func theFeedEndsWithTheLastStorageWhenTheIdentityChangedMeanwhile() {
        let store = HostileStore(identityFollowsGeneration: true)
        do {
            let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
            #expect(store.feedCount == 1)
            store.newGeneration()  // the store reconnected
            storage.wrappedValue = 1
        }
        #expect(store.stored("n") == "1")
        #expect(eventually(timeout: 30) { store.feedCount == 0 }, "the feed outlives every storage of the store")
    }

    @Test func aChangeToEveryKeyReachesTheStorageWhenTheIdentityChangedMeanwhile() {
        let store = HostileStore(identityFollowsGeneration: true)
        store.writeFromOutside("n", json: "1")
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
        #expect(storage.wrappedValue == 1)
        store.newGeneration()  // the store reconnected; its feed, started before, goes on
        store.state.withLock { $0.values["n"] = Data("4".utf8) }
        store.report(.everything)  // events may have been lost while reconnecting
        #expect(eventually(timeout: 30) { storage.wrappedValue == 4 }, "the feed's report reached no cell")
    }
}
