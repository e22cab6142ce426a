import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

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

    /// Two threads flush every storage at once, over objects one in five of which another program changed (another
    /// field), unheard of: each object is written once (refused in a batch, then on its own onto the other change),
    /// nothing stays pending, and every stored object holds both changes.
    @Test func twoFlushesOfEveryStorageAtOnceWriteEachObjectOnce() throws {
        let store = MemoryStore()
        let keys = (0..<50).map { String(format: "pair%02d", $0) }
        for key in keys { store.writeFromOutside(key, json: #"{"a":0,"b":0}"#) }
        let storages = keys.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: store) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }
        for key in keys.enumerated().filter({ $0.offset % 5 == 0 }).map(\.element) {
            store.writeUnreported(key, json: #"{"a":0,"b":7}"#)
        }
        let writes = store.writes

        let flushes = (0..<2).map { _ in startThread { flushAllStores([store]) } }
        for flush in flushes { #expect(flush.wait(timeout: .now() + 120) == .success) }
        #expect(storages.allSatisfy { !$0.hasPendingChanges }, "\(storages.compactMap(\.lastError).prefix(3))")
        #expect(store.writes - writes == keys.count, "each object written once")
        for (index, key) in keys.enumerated() {
            let stored = try JSONDecoder().decode(Pair.self, from: Data(try #require(store.stored(key)).utf8))
            #expect(stored == Pair(a: index + 1, b: index % 5 == 0 ? 7 : 0), "\(key)")
        }
    }

    /// A batch on condition writes its first chunk, refusing an object there whose field another program set, unheard
    /// of, and its second chunk fails, before anything of it was sent. Objects of the second chunk whose field another
    /// program set keep this program's change (they were not sent), and so does the object refused in the first chunk:
    /// the error gives the first chunk's answers (``WLStorageError/storedAnswers``), so it goes back as refused, not as
    /// a write of unknown outcome, which would give the field to the other program's value.
    @Test func aBatchOnConditionWhoseSecondChunkFailsKeepsTheChangesOfBothChunks() throws {
        let store = MemoryStore()
        let keys = (0..<10).map { "pair\($0)" }
        for key in keys { store.writeFromOutside(key, json: #"{"a":0,"b":0}"#) }
        let storages = keys.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: store) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }
        for key in ["pair2", "pair7"] { store.writeUnreported(key, json: #"{"a":-1,"b":7}"#) }
        store.failTheNextConditionalBatch(after: 5)

        flushAllStores([store])
        #expect(store.conditionalBatches.flatMap { $0 } == keys)
        #expect(storages.allSatisfy { !$0.hasPendingChanges }, "\(storages.compactMap(\.lastError).prefix(3))")
        for (index, key) in keys.enumerated() {
            let stored = try JSONDecoder().decode(Pair.self, from: Data(try #require(store.stored(key)).utf8))
            let expected = Pair(a: index + 1, b: ["pair2", "pair7"].contains(key) ? 7 : 0)
            #expect(stored == expected, "\(key)")
        }
    }

    /// The contract's own batch on condition, which writes one key at a time, says where it failed: the writes before
    /// are answered (stored or refused), the one that failed may have been stored, and those after were not sent.
    @Test func theOneByOneBatchOnConditionThatFailsPartWaySaysWhatWasAnswered() throws {
        struct Unreachable: Error {}
        let store = InterceptedStore()
        store.base.writeFromOutside("b", json: "1")
        store.beforeNextConditionalWrite {
            store.beforeNextConditionalWrite { store.beforeNextConditionalWrite { throw Unreachable() } }
        }
        let writes = ["a", "b", "c", "d"].map { WLStorageStoreWrite(key: $0, data: Data("2".utf8)) }
        #expect {
            _ = try store.write(writes, ifTheyHold: [nil, nil, nil, nil])
        } throws: { error in
            let error = error as? WLStorageError
            return error?.storedWrites == 3 && error?.storedAnswers == [true, false] && error?.underlying is Unreachable
        }
        #expect(store.base.stored("a") == "2" && store.base.stored("b") == "1")
        #expect(store.base.stored("c") == nil && store.base.stored("d") == nil)
    }

    /// An encrypted store's batch on condition sends the store below only the writes whose keys hold what they expect:
    /// when that batch fails part way, the error counts in the whole batch, the writes left out answered (refused).
    @Test func anEncryptedBatchOnConditionThatFailsPartWayCountsTheWritesItLeftOut() throws {
        let store = MemoryStore()
        let encrypted = store.encrypted(with: try .random())
        let keys = (0..<6).map { "k\($0)" }
        for key in keys { try encrypted.write(key: key, data: Data("1".utf8)) }
        let conditional = try #require(Stores.capabilities(of: encrypted).conditional)
        store.failTheNextConditionalBatch(after: 2)
        let writes = keys.map { WLStorageStoreWrite(key: $0, data: Data("2".utf8)) }
        #expect {
            _ = try conditional.write(writes, ifTheyHold: keys.map { Data(($0 == "k1" ? "0" : "1").utf8) })
        } throws: { error in
            let error = error as? WLStorageError
            return error?.storedAnswers == [true, false, true, false, false, false] && error?.storedWrites == 6
        }
        #expect(store.conditionalBatches == [["k0", "k2", "k3", "k4", "k5"]])
        #expect(try keys.map { try encrypted.read(key: $0) } == ["2", "1", "2", "1", "1", "1"].map { Data($0.utf8) })
    }

    /// An encrypted store leaves out of the batch it sends below the objects whose keys another program changed,
    /// unheard of; when that batch's answer is lost (on PostgreSQL, a chunk's commit unanswered: its error counts the
    /// writes up to its end as maybe stored), those objects, never sent, go back as refused and keep this program's
    /// change of the field the other program set too (a write never sent is no write of unknown outcome, as above):
    /// the error's answers say, write by write, which are not known (``WLStorageError/storedAnswers``).
    @Test func anEncryptedObjectLeftOutOfABatchWhoseAnswerIsLostKeepsItsChange() throws {
        let store = MemoryStore()
        let key = try WLStorageEncryptionKey.random()
        let encrypted = store.encrypted(with: key)
        let keys = (0..<3).map { "pair\($0)" }
        for name in keys { try encrypted.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let storages = keys.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: encrypted) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }
        let other = MemoryStore()
        try other.encrypted(with: key).write(key: "pair1", data: Data(#"{"a":-1,"b":7}"#.utf8))
        store.writeUnreported("pair1", data: try #require(try other.read(key: "pair1")))
        store.loseTheAnswerOfTheNextConditionalBatch()

        flushAllStores([encrypted])
        #expect(store.conditionalBatches.first == ["pair0", "pair2"], "\(store.conditionalBatches)")
        #expect(storages.allSatisfy { !$0.hasPendingChanges }, "\(storages.compactMap(\.lastError).prefix(2))")
        let stored = try JSONDecoder().decode(Pair.self, from: try #require(try encrypted.read(key: "pair1")))
        #expect(stored == Pair(a: 2, b: 7), "\(stored)")
    }
}
