import Foundation
import Synchronization
import Testing
import WLStorageJSON
import WLStorageTestSupport

@testable import WLStorage

// The members of a stored JSON object that a type does not know survive its writes (see `UnknownFields`), whatever
// the type holds and however the stored object is written; and the bytes written always read back as the value.

private struct Tagged: Codable, Equatable, Sendable {
    var name = ""
    var tags: Set<String> = []
}

/// The older version's shape, and the newer one's, which has a case more.
private enum Shape: Codable, Equatable, Sendable {
    case circle(radius: Int)
    case square(side: Int)
}

private enum NewerShape: Codable, Equatable, Sendable {
    case circle(radius: Int)
    case square(side: Int)
    case triangle(base: Int)
}

private struct Drawing: Codable, Equatable, Sendable {
    var shape = Shape.circle(radius: 1)
    var title = ""
}

private struct NewerDrawing: Codable, Equatable, Sendable {
    var shape = NewerShape.circle(radius: 1)
    var title = ""
}

private struct Named: Codable, Equatable, Sendable {
    var name: String? = nil
    var count = 0
}

private struct Nest: Codable, Equatable, Sendable {
    var inner = Named()
}

/// A type that counts its decodes.
private struct Counted: Codable {
    static let decodes = Atomic<Int>(0)
    var count = 0

    init(count: Int) {
        self.count = count
    }

    init(from decoder: any Decoder) throws {
        Self.decodes.add(1, ordering: .relaxed)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        count = try container.decode(Int.self, forKey: .count)
    }
}

private struct CountedEntries: Codable {
    static let decodes = Atomic<Int>(0)
    var counts: [String: Int]

    init(counts: [String: Int]) {
        self.counts = counts
    }

    init(from decoder: any Decoder) throws {
        Self.decodes.add(1, ordering: .relaxed)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        counts = try container.decode([String: Int].self, forKey: .counts)
    }
}

private struct CountedOverAnother: Codable {
    static let decodes = Atomic<Int>(0)
    var count: Int
    var counts: [String: Int]

    init(count: Int, counts: [String: Int]) {
        self.count = count
        self.counts = counts
    }

    init(from decoder: any Decoder) throws {
        Self.decodes.add(1, ordering: .relaxed)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        count = try container.decode(Int.self, forKey: .count)
        counts = try container.decode([String: Int].self, forKey: .counts)
    }
}

private func merged<T: Codable>(_ value: T, over stored: String) throws -> String {
    let encoded = try JSONCoders.encoder.encode(value)
    let data = UnknownFields.merging(encoded, keepingUnknownOf: Data(stored.utf8), as: T.self) ?? encoded
    return String(decoding: data, as: UTF8.self)
}

private func contentsOf(_ name: String, in directory: URL) -> String? {
    FileManager.default.contents(atPath: directory.appendingPathComponent(name).path).map {
        String(decoding: $0, as: UTF8.self)
    }
}

private func object(_ json: String) -> NSDictionary? {
    (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? NSDictionary
}

@Suite(.onTestThreads)
struct UnknownFieldsTests {
    @Test func aTypeWithASetKeepsTheFieldsOfANewerVersion() throws {
        let tags = (0..<100).map { "t\($0)" }
        let list = tags.map { #""\#($0)""# }.joined(separator: ",")
        let stored = #"{"name":"a","tags":[\#(list)],"zoom":2}"#
        // A set made otherwise than by decoding: its order is its own.
        var made = Set(tags.reversed())
        made.reserveCapacity(1_000)
        let value = Tagged(name: "b", tags: made)
        // Two equal sets decoded apart iterate in orders of their own, more often than not different: every write
        // keeps the field.
        for _ in 0..<20 {
            let written = try merged(value, over: stored)
            #expect(object(written)?["zoom"] as? Int == 2)
            #expect(try JSONCoders.decoder.decode(Tagged.self, from: Data(written.utf8)) == value)
        }
    }

    @Test func anOptionalSetToNilOverAValueOfAnotherVersionIsWrittenAsNil() throws {
        let stored = #"{"count":"many","name":"ada","zoom":2}"#
        let value = Named(name: nil, count: 3)
        let written = try merged(value, over: stored)
        #expect(try JSONCoders.decoder.decode(Named.self, from: Data(written.utf8)) == value)
        #expect(object(written)?["zoom"] as? Int == 2)
    }

    @Test func aWriteOverThousandsOfUnknownMembersDecodesTheValueAFewTimes() throws {
        var members = (0..<1_000).map { #""extra\#($0)":\#($0)"# }
        members.append(#""count":1"#)
        let stored = "{" + members.joined(separator: ",") + "}"
        let before = Counted.decodes.load(ordering: .relaxed)
        let written = try merged(Counted(count: 2), over: stored)
        #expect(Counted.decodes.load(ordering: .relaxed) - before < 10)
        #expect(object(written)?.count == 1_001)
        #expect(object(written)?["count"] as? Int == 2)
    }

    @Test func aWriteThatRemovesThousandsOfEntriesDecodesTheValueAFewTimes() throws {
        let entries = (0..<1_000).map { #""k\#($0)":\#($0)"# }
        let stored = #"{"counts":{"# + entries.joined(separator: ",") + "}}"
        let before = CountedEntries.decodes.load(ordering: .relaxed)
        let written = try merged(CountedEntries(counts: ["a": 1]), over: stored)
        #expect(CountedEntries.decodes.load(ordering: .relaxed) - before < 10)
        #expect(written == #"{"counts":{"a":1}}"#)
    }

    @Test func aWriteThatRemovesHundredsOfEntriesOverAnotherVersionsValueDecodesTheValueAFewTimes() throws {
        // Another version's value (its count is a string), which this version's decoder cannot judge members by.
        let entries = (0..<500).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
        let stored = #"{"count":"many","counts":{"# + entries + #"},"zoom":2}"#
        var counts = ["k0": 0]
        for index in 0..<500 { counts["v\(index)"] = index }
        let value = CountedOverAnother(count: 1, counts: counts)
        let before = CountedOverAnother.decodes.load(ordering: .relaxed)
        let written = try merged(value, over: stored)
        #expect(CountedOverAnother.decodes.load(ordering: .relaxed) - before < 10)
        let read = try JSONCoders.decoder.decode(CountedOverAnother.self, from: Data(written.utf8))
        #expect(read.counts == counts)
        #expect(object(written)?["zoom"] as? Int == 2)
    }

    @Test func aKeyTheStoredObjectHoldsTwiceIsWrittenOnceWithTheValueTheDecoderReads() throws {
        // The decoder reads the first of a repeated key: what the other version read stays what it reads.
        let written = try merged(Named(name: nil, count: 2), over: #"{"count":1,"zoom":1,"zoom":2}"#)
        #expect(written == #"{"count":2,"zoom":1}"#)
        let nested = try merged(
            Nest(inner: Named(name: nil, count: 2)),
            over: #"{"inner":{"count":1,"zoom":1},"inner":{"count":1,"zoom":2}}"#)
        #expect(nested == #"{"inner":{"count":2,"zoom":1}}"#)
    }

    @Test(arguments: [
        #"{"co\u0075nt":1,"zo\u006fm":2}"#,
        "\u{FEFF}{\n  \"count\" : 1,\n  \"zoom\" : 2\n}\n",
        #"{ "zoom" : 2 , "count" : 1.0 }"#,
    ])
    func storedObjectsHoweverWrittenKeepTheirUnknownMembers(stored: String) throws {
        let written = try merged(Named(name: nil, count: 2), over: stored)
        #expect(object(written) == object(#"{"count":2,"zoom":2}"#))
        #expect(try JSONCoders.decoder.decode(Named.self, from: Data(written.utf8)) == Named(name: nil, count: 2))
    }

    @Test func anOlderVersionsCaseOverANewerVersionsCaseReadsBackInBothVersions() throws {
        let stored = #"{"shape":{"triangle":{"base":3}},"title":"t","zoom":2}"#
        let written = try merged(Drawing(shape: .square(side: 2), title: "u"), over: stored)
        #expect(try JSONCoders.decoder.decode(Drawing.self, from: Data(written.utf8)).shape == .square(side: 2))
        #expect(
            try JSONCoders.decoder.decode(NewerDrawing.self, from: Data(written.utf8))
                == NewerDrawing(shape: .square(side: 2), title: "u"))
        #expect(object(written)?["zoom"] as? Int == 2)
    }

    @Test func anOlderVersionsCaseStoredAloneOverANewerVersionsCaseReadsBackInBothVersions() throws {
        let written = try merged(Shape.square(side: 2), over: #"{"triangle":{"base":3}}"#)
        #expect(try JSONCoders.decoder.decode(Shape.self, from: Data(written.utf8)) == .square(side: 2))
        #expect(try JSONCoders.decoder.decode(NewerShape.self, from: Data(written.utf8)) == .square(side: 2))
    }

    @Test func aCaseWithAFieldOfANewerVersionKeepsIt() throws {
        let stored = #"{"shape":{"square":{"colour":"red","side":3}},"title":"t"}"#
        let written = try merged(Drawing(shape: .square(side: 2), title: "t"), over: stored)
        #expect(written == #"{"shape":{"square":{"colour":"red","side":2}},"title":"t"}"#)
    }

    @Test func aValueThatFitsButNotWithTheUnknownFieldsIsRefusedSayingSo() throws {
        let limit = ValueSizeLimit.maximum
        // The bytes below are made for the default limit, which no test of this process changes.
        try #require(limit == ValueSizeLimit.defaultMaximum)
        let blob = String(repeating: "b", count: limit - 40)
        let stored = Data(#"{"blob":"\#(blob)","count":1}"#.utf8)
        #expect(stored.count <= limit)
        var thrown: WLStorageError?
        do {
            let value = Named(name: "a long enough name", count: 2)
            _ = try JSONCoders.encode(value, key: "named", keepingUnknownOf: stored)
        } catch {
            thrown = error
        }
        let error = try #require(thrown)
        #expect(error.code == .valueTooLarge)
        #expect(error.message.contains("removeUnknownFields()"))
        #expect(error.message.contains("the value encodes to 39 bytes,"))
    }

    // MARK: Through a storage

    @Test func removeUnknownFieldsLeavesAValueThisVersionCannotReadAsItIs() throws {
        try withTemporaryDirectory { directory in
            let newer = #"{"count":"many","name":"ada"}"#
            try Data(newer.utf8).write(to: directory.appendingPathComponent("named"))
            let storage = WLStorage(
                key: "named", defaultValue: Named(), flushInterval: nil, store: .directory(directory))
            #expect(storage.lastError?.code == .storedByAnotherVersion)
            storage.removeUnknownFields()
            #expect(!storage.hasPendingChanges)
            #expect(contentsOf("named", in: directory) == newer)
            // A set is written over it, without the fields it had.
            storage.wrappedValue.count = 3
            storage.flush()
            #expect(contentsOf("named", in: directory) == #"{"count":3}"#)
        }
    }

    @Test func removeUnknownFieldsLeavesAValueThisVersionCannotReadInAStoreAsItIs() throws {
        let store = MemoryStore()
        let newer = #"{"count":"many","name":"ada"}"#
        store.writeFromOutside("named", json: newer)
        let storage = WLStorage(key: "named", defaultValue: Named(), flushInterval: nil, store: store)
        #expect(storage.lastError?.code == .storedByAnotherVersion)
        storage.removeUnknownFields()
        #expect(store.stored("named") == newer)
    }

    @Test func removeUnknownFieldsBeforeTheFirstReadSucceedsWritesNothingOverAValueThisVersionCannotRead() throws {
        let store = MemoryStore()
        store.failReads(true)
        let storage = WLStorage(key: "named", defaultValue: Named(), flushInterval: nil, store: store)
        #expect(storage.lastError != nil, "the first read did not fail")
        // Nothing was read: there are no fields to remove, and the default is no value to write.
        storage.removeUnknownFields()
        let newer = #"{"count":"many","name":"ada"}"#
        store.writeUnreported("named", json: newer)
        store.failReads(false)
        storage.flush()
        #expect(store.stored("named") == newer)
        #expect(storage.wrappedValue == Named())
    }

    @Test(arguments: [#"{"count":1,"old":true}"#, "1"])
    func aRemovalOfUnknownFieldsNotWrittenYetGivesWayToAValueAnotherVersionStoresMeanwhile(stored: String) throws {
        let store = MemoryStore()
        store.writeFromOutside("named", json: stored)
        let newer = #"{"count":"many","name":"ada"}"#
        func removeThenAnotherVersionStores<T: Codable & Sendable>(_ storage: WLStorage<T>) {
            store.failWrites(true)
            storage.removeUnknownFields()
            // A number has no fields to remove: nothing is asked, nothing fails.
            #expect(storage.hasPendingChanges == stored.hasPrefix("{"), "the write did not fail, or was asked for")
            store.writeFromOutside("named", json: newer)
            #expect(eventually { storage.lastError?.code == .storedByAnotherVersion }, "the change was not seen")
            store.failWrites(false)
            storage.flush()
            #expect(!storage.hasPendingChanges)
        }
        // An object, whose write goes field by field, and a number, which has no fields.
        if stored.hasPrefix("{") {
            removeThenAnotherVersionStores(
                WLStorage(key: "named", defaultValue: Named(), flushInterval: nil, store: store))
        } else {
            removeThenAnotherVersionStores(WLStorage(key: "named", defaultValue: 0, flushInterval: nil, store: store))
        }
        #expect(store.stored("named") == newer)
    }

    /// A set not written yet is a change of this process: a removal of unknown fields asked after it does not make it
    /// give way to another version's value, as the removal alone does.
    @Test func aSetNotWrittenYetIsWrittenOverAValueAnotherVersionStoresAfterARemovalOfUnknownFields() throws {
        let store = MemoryStore()
        store.writeFromOutside("named", json: #"{"count":1,"old":true}"#)
        let storage = WLStorage(key: "named", defaultValue: Named(), flushInterval: nil, store: store)
        store.failWrites(true)
        storage.wrappedValue.count = 5
        storage.removeUnknownFields()
        #expect(storage.hasPendingChanges, "the write did not fail")
        store.writeFromOutside("named", json: #"{"count":"many","name":"ada"}"#)
        #expect(eventually { storage.lastError?.code == .storedByAnotherVersion }, "the change was not seen")
        store.failWrites(false)
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let stored = try JSONDecoder().decode(Named.self, from: Data(try #require(store.stored("named")).utf8))
        #expect(stored.count == 5, "the set was dropped")
    }

    /// A set made while what is stored is unknown is written over another version's value once read, whether or not
    /// unknown fields were asked to go after it.
    @Test func aSetBeforeTheFirstReadIsWrittenOverAnotherVersionsValueDespiteARemovalOfUnknownFields() throws {
        let store = MemoryStore()
        store.failReads(true)
        let storage = WLStorage(key: "named", defaultValue: Named(), flushInterval: nil, store: store)
        #expect(storage.lastError != nil, "the first read did not fail")
        storage.wrappedValue.count = 5
        storage.removeUnknownFields()
        #expect(storage.hasPendingChanges, "the read did not fail")
        store.writeUnreported("named", json: #"{"count":"many","name":"ada"}"#)
        store.failReads(false)
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let stored = try JSONDecoder().decode(Named.self, from: Data(try #require(store.stored("named")).utf8))
        #expect(stored.count == 5, "the set was dropped")
    }

    /// A removal of unknown fields not written yet is no change of the value: another program's change of the value
    /// made meanwhile, in this version's shape, is kept.
    @Test func aRemovalOfUnknownFieldsNotWrittenYetKeepsAChangeAnotherProgramMakesMeanwhile() throws {
        let store = MemoryStore()
        store.writeFromOutside("named", json: #"{"count":1,"old":true}"#)
        let storage = WLStorage(key: "named", defaultValue: Named(), flushInterval: nil, store: store)
        store.failWrites(true)
        storage.removeUnknownFields()
        #expect(storage.hasPendingChanges, "the write did not fail")
        store.writeFromOutside("named", json: #"{"count":9}"#)
        #expect(eventually { hasHeardWhatIsStored(storage) }, "the change was not seen")
        store.failWrites(false)
        storage.flush()
        let stored = try JSONDecoder().decode(Named.self, from: Data(try #require(store.stored("named")).utf8))
        #expect(stored.count == 9, "another program's change was replaced")
        #expect(storage.wrappedValue.count == 9)
    }

    @Test func aSetAfterAnOutsideChangeKeepsTheFieldsOfTheChangeNotOfTheValueBefore() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("named")
            try Data(#"{"count":1,"old":1}"#.utf8).write(to: file)
            let storage = WLStorage(
                key: "named", defaultValue: Named(), flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.count == 1)
            try replaceFromOutside(file, with: #"{"count":2,"new":2}"#)
            storage.cell.checkForExternalChange()
            #expect(eventually { storage.wrappedValue.count == 2 })
            storage.wrappedValue.name = "ada"
            storage.flush()
            #expect(contentsOf("named", in: directory) == #"{"count":2,"name":"ada","new":2}"#)
        }
    }

    @Test func anUnknownMemberNestedAsDeepAsTheDecoderReadsIsKeptByAWriteInTheBackground() throws {
        try withTemporaryDirectory { directory in
            // Foundation reads arrays and objects nested 512 deep.
            let depth = 512 - 2
            let deep = String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
            let stored = #"{"count":1,"deep":\#(deep)}"#
            try Data(stored.utf8).write(to: directory.appendingPathComponent("named"))
            let storage = WLStorage(key: "named", defaultValue: Named(), flushInterval: 0, store: .directory(directory))
            #expect(storage.lastError == nil)
            storage.wrappedValue.count = 2
            storage.flush()
            #expect(contentsOf("named", in: directory) == #"{"count":2,"deep":\#(deep)}"#)
        }
    }

    @Test func anOlderVersionsSetThroughAnEncryptedStoreKeepsTheFieldsOfANewerOne() throws {
        try withTemporaryDirectory { directory in
            let key = try WLStorageEncryptionKey.random()
            let store = WLStorageDirectoryStore.directory(directory).encrypted(with: key)
            try store.write(key: "named", data: Data(#"{"count":1,"name":"ada","zoom":{"level":2}}"#.utf8))
            let storage = WLStorage(key: "named", defaultValue: Named(), flushInterval: nil, store: store)
            #expect(storage.wrappedValue == Named(name: "ada", count: 1))
            storage.update { $0.count += 1 }
            storage.flush()
            let written = try #require(try store.read(key: "named"))
            #expect(String(decoding: written, as: UTF8.self) == #"{"count":2,"name":"ada","zoom":{"level":2}}"#)
            storage.wrappedValue.name = nil
            storage.flush()
            let again = try #require(try store.read(key: "named"))
            #expect(String(decoding: again, as: UTF8.self) == #"{"count":2,"zoom":{"level":2}}"#)
        }
    }
}
