// A change made while its batch is written is written by the same `flushAll`.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

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
