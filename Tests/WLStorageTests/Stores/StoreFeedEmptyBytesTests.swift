// A key holding empty bytes does not keep its released cell and the store's feed forever.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// "A default is saved only where nothing is stored", and a released storage's cell is kept only "until the work is
/// done".
///
/// `WLStorageDefaultBacker.readStored` counts empty bytes as nothing stored, so the cell starts `.defaultUnsaved`; the store's
/// `create` rightly refuses (something is stored), the read after it finds "nothing" again, and
/// `StoreMedium.entryExists` is always `false`, so `StorageCell.perform(.createDefault)` returns `.read(.absent)`:
/// the save failed, to be retried. It never succeeds. The cell tries again forever with the backoff, and once its
/// last storage is released it is orphaned and kept by the registry for good, with the store's feed.
@Suite(.capturingOutput) struct StoreFeedEmptyBytesTests {
    @Test func aKeyHoldingEmptyBytesDoesNotKeepItsReleasedCellAndFeedForever() {
        let store = HostileStore()
        store.writeFromOutside("k", json: "")
        weak var cell: StorageCell<Int>?
        do {
            let storage = WLStorage(key: "k", defaultValue: 3, flushInterval: 1, store: store)
            cell = storage.cell
            #expect(storage.wrappedValue == 3)
            storage.flush()
        }
        #expect(store.stored("k") == "")  // left alone: a default is not saved over what is stored
        #expect(eventually(timeout: 30) { cell == nil }, "the released cell is kept, retrying its default for good")
        #expect(eventually(timeout: 30) { store.feedCount == 0 }, "the store's feed outlives every storage")
    }
}
