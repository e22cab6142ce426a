import Foundation
import Testing

@testable import WLStorage

/// The objects of a batch on condition that failed, given back to their cells' own flushes.
@Suite(.capturingOutput) struct FailedBatchOnConditionHandBackTests {
    struct Pair: Codable, Sendable, Equatable {
        var a = 0
        var b = 0
    }

    /// Another program set the field this program changed, unheard of, before a flush of every storage: this program's
    /// change, written later, wins when the batch on condition refuses the object, and when the batch failed before it
    /// stored anything, as its error says (``WLStorageError/storedWrites`` 0): a write never sent is no write of unknown
    /// outcome, after which another program's change of a field would win.
    @Test(arguments: [false, true])
    func aChangeOfAFieldSetElsewhereWinsWhenTheBatchOnConditionStoredNothing(failing: Bool) throws {
        let store = MemoryStore()
        store.writeFromOutside("pair", json: #"{"a":0,"b":0}"#)
        let storage = WLStorage(key: "pair", defaultValue: Pair(), flushInterval: nil, store: store)
        #expect(storage.wrappedValue == Pair())
        #expect(eventually { storage.cell.state.withLock { !$0.isBusy } })
        storage.wrappedValue.a = 1
        store.writeUnreported("pair", json: #"{"a":2,"b":3}"#)
        if failing { store.loseTheAnswerOfTheNextConditionalBatch(afterStoring: false) }

        flushAllStores([store])
        #expect(store.conditionalBatches.flatMap { $0 } == ["pair"])
        #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
        let stored = try JSONDecoder().decode(Pair.self, from: Data(try #require(store.stored("pair")).utf8))
        #expect(stored == Pair(a: 1, b: 3))
    }
}
