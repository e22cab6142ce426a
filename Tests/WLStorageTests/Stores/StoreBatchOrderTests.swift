// The batch a flush sends a store holds its writes in the keys' order, whatever order the storages came in: an etcd
// transaction's fence then spans only its own keys, and two processes' batches take the rows they share in one order.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct StoreBatchOrderTests {
    @Test func aFlushSendsAStoreItsBatchInTheKeysOrder() throws {
        let store = HostileStore()
        let sent = Lock<[[String]]>([])
        store.onBatch = { store, batch in
            sent.withLock { $0.append(batch.map(\.key)) }
            for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
        }
        let keys = (0..<40).map { "k\($0 * 17 % 40)" }
        for key in keys { store.writeFromOutside(key, json: "0") }
        let storages = keys.map { WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store) }
        for (index, storage) in storages.enumerated() { storage.wrappedValue = index + 1 }
        flushAllStores([store])
        let batches = sent.withLock { $0 }
        try #require(batches.count == 1)
        #expect(batches.first == keys.sorted())
        for (index, key) in keys.enumerated() { #expect(store.stored(key) == "\(index + 1)") }
    }
}
