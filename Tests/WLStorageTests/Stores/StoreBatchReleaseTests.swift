// The last storage of a batched key released inside the batch is written, and its cell let go after the batch.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

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
