// A batch a store wrote in part: what it says it stored counts as written, and the rest stays pending.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

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
