// A value read through a migration is written back in the current shape only while the store still holds what was
// read: also when the flush of every storage writes a store's changes in one batch.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct RewriteInABatchTests {
    private struct Old: Codable { var n: Int }

    /// Another program's change, not reported yet when the flush runs, is not replaced by the rewrite; a change of
    /// this process in the same store is written in the batch all the same.
    @Test func aRewriteGivesWayToAChangeMadeMeanwhileWhenEveryStorageIsFlushed() throws {
        let store = MemoryStore()
        try store.write(key: "migrated", data: Data(#"{"n":5}"#.utf8))
        let migrated = WLStorage(
            key: "migrated", defaultValue: 0, flushInterval: nil, store: store,
            migrations: [.from(Old.self) { $0.n }])
        let other = WLStorage(key: "other", defaultValue: 0, flushInterval: nil, store: store)
        try #require(migrated.wrappedValue == 5)
        try #require(migrated.hasPendingChanges, "the migrated value is not to be written back")
        // Another program stores 42; its report has not come yet.
        try store.write(key: "migrated", data: Data("42".utf8))
        other.wrappedValue = 7
        flushAllStores([store])
        #expect(store.stored("migrated") == "42", "the rewrite replaced another program's change")
        #expect(store.stored("other") == "7")
        #expect(eventually(timeout: 30) { migrated.wrappedValue == 42 }, "the storage has \(migrated.wrappedValue)")
    }
}
