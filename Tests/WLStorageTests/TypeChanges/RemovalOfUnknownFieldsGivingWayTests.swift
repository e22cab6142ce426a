import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

private struct Tally: Codable, Equatable, Sendable {
    var count = 0
}

// A removal of unknown fields is not a change of the value: when it gives way to another version's value, nothing of
// it is left to the writes after it, which keep the fields of what they replace as any write does.
@Suite(.onTestThreads) struct RemovalOfUnknownFieldsGivingWayTests {
    /// `removeUnknownFields()` asked for while a check of another version's write runs: the removal gives way to what
    /// the check finds. A set after it is written over that value keeping the fields this version does not know, as a
    /// set is; the removal that gave way must not drop them.
    @Test func aSetAfterARemovalThatGaveWayKeepsTheFieldsOfAnotherVersionsValue() throws {
        let store = InterceptedStore()
        store.base.writeUnreported("tally", json: #"{"count":1,"label":"kept"}"#)
        let storage = WLStorage(key: "tally", defaultValue: Tally(), flushInterval: nil, store: store)
        #expect(storage.wrappedValue == Tally(count: 1))

        // Another version stores what this one cannot read; the check of its news stops before it reads.
        let gate = store.holdNextRead()
        store.base.writeFromOutside("tally", json: #"{"count":"many","label":"kept"}"#)
        try #require(gate.entered.wait(timeout: .now() + 60) == .success, "no check read the key")
        // The removal, asked for meanwhile, waits for the check to end.
        let removed = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            storage.removeUnknownFields()
            removed.signal()
        }
        #expect(eventually { storage.hasPendingChanges }, "the removal was not asked for")
        gate.open.signal()
        try #require(removed.wait(timeout: .now() + 60) == .success)
        #expect(store.base.stored("tally") == #"{"count":"many","label":"kept"}"#)
        #expect(!storage.hasPendingChanges)

        storage.wrappedValue = Tally(count: 5)
        storage.flush()
        let stored = try #require(store.base.stored("tally"))
        let object = try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any]
        #expect(object?["count"] as? Int == 5, "\(stored)")
        #expect(object?["label"] as? String == "kept", "the removal that gave way dropped the field: \(stored)")
    }
    /// A removal of unknown fields whose write failed is still pending when every storage is flushed (at exit), and
    /// another program changed the value since, unheard of: the flush writes the removal onto that change, as the
    /// storage's own write would, not the value in memory whole over it.
    @Test func aRemovalLeftPendingIsNotWrittenWholeByAFlushOfAllOverAChangeNotHeardOf() throws {
        struct Unreachable: Error {}
        let store = InterceptedStore()
        store.base.writeUnreported("tally", json: #"{"count":1,"label":"old"}"#)
        let storage = WLStorage(key: "tally", defaultValue: Tally(), flushInterval: nil, store: store)
        #expect(storage.wrappedValue == Tally(count: 1))
        store.beforeNextConditionalWrite { throw Unreachable() }
        storage.removeUnknownFields()
        try #require(storage.hasPendingChanges, "the removal's write did not fail")
        // Another program counts, and this one has not heard of it yet.
        store.base.writeUnreported("tally", json: #"{"count":2,"label":"old"}"#)

        flushAllStores([store])
        #expect(!storage.hasPendingChanges, "\(storage.lastError?.message ?? "")")
        let stored = try #require(store.base.stored("tally"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any])
        #expect(object["count"] as? Int == 2, "the removal wrote the value in memory over another program's: \(stored)")
    }

    /// A value that is no JSON object (a number, an array) has no fields: a removal of unknown fields has nothing to
    /// drop, and must not write the value in memory over one another program stored since, not heard of yet.
    @Test func aRemovalOverANumberWritesNothing() {
        removeUnknownFields(of: 0, stored: "1", storedSince: "2")
    }

    @Test func aRemovalOverAnArrayWritesNothing() {
        removeUnknownFields(of: [0], stored: "[1]", storedSince: "[2]")
    }

    private func removeUnknownFields<T: Codable & Sendable & Equatable>(
        of defaultValue: T, stored: String, storedSince: String
    ) {
        let store = InterceptedStore()
        store.base.writeUnreported("n", json: stored)
        let storage = WLStorage(key: "n", defaultValue: defaultValue, flushInterval: nil, store: store)
        #expect(storage.wrappedValue != defaultValue, "the stored value was not read")
        store.base.writeUnreported("n", json: storedSince)
        storage.removeUnknownFields()
        #expect(!storage.hasPendingChanges)
        #expect(store.base.stored("n") == storedSince, "the removal wrote the value in memory over a newer one")
    }
}
