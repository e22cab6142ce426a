// A change written onto another program's is judged against the value read as this program encodes it: members the
// program did not change (a `Set` in another order, a member filled in, a `null` it does not write, a number spelled in
// more digits than its `Double`) keep the other program's value, however the value was read (at the start, adopted
// from a check, through a decoder of the type's own) and whatever the checks saw while the change was pending; and a
// change of the default taken after a removal goes onto a value stored since as the members it changed.
import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput)
struct ChangeJudgedAgainstTheValueReadTests {
    static let key = "judged"

    private struct Tagged: Codable, Equatable, Sendable {
        var tags: Set<String> = []
        var count = 0
    }

    /// The version that added `b`; an earlier one stored `a` alone.
    private struct Added: Codable, Equatable, Sendable {
        var a = 0
        var b = 0
    }

    /// The same, decoding a missing `b` as its default itself, as types often do when they gain a field.
    private struct AddedByItsDecoder: Codable, Equatable, Sendable {
        var a = 0
        var b = 0

        init(a: Int = 0, b: Int = 0) { (self.a, self.b) = (a, b) }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            a = try container.decode(Int.self, forKey: .a)
            b = try container.decodeIfPresent(Int.self, forKey: .b) ?? 0
        }
    }

    private struct Noted: Codable, Equatable, Sendable {
        var a = 0
        var note: String?
    }

    private struct Ratio: Codable, Equatable, Sendable {
        var ratio = 0.0
        var y = 0
    }

    private func stored(_ store: MemoryStore) -> Data? { store.contents.state.withLock { $0.values[Self.key] } }

    /// `tags` as the process encodes them, in reverse, as the members of a JSON array.
    private func reversed(_ tags: Set<String>) throws -> String {
        let order = try JSONDecoder().decode([String: [String]].self, from: JSONEncoder().encode(["tags": tags]))
        return try #require(order["tags"]).reversed().map { #""\#($0)""# }.joined(separator: ",")
    }

    /// A set read in another order stays no change of the writer's while its change is pending and the checks see two
    /// other programs' changes (the value read was no longer kept after the second, and the set counted as changed and
    /// was written over the last program's added element).
    @Test func aSetReadInAnotherOrderIsNoChangeAfterTwoChangesSeenWhileTheChangeWasPending() throws {
        let tags: Set<String> = ["a", "b", "c", "d", "e", "f", "g", "h"]
        let reversed = try reversed(tags)
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"count":1,"tags":[\#(reversed)]}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Tagged(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(writer.wrappedValue == Tagged(tags: tags, count: 1))
        writer.wrappedValue.count = 2
        for added in ["y", "z"] {
            store.writeFromOutside(Self.key, json: #"{"count":1,"tags":["\#(added)",\#(reversed)]}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(writer) })
        }
        writer.flush()
        let after = try #require(stored(store))
        #expect(try JSONDecoder().decode(Tagged.self, from: after) == Tagged(tags: tags.union(["z"]), count: 2))
    }

    /// A member filled from the default into a value adopted from a check is no change of the writer's: another
    /// program's value of it, stored meanwhile, stands (the value adopted was not kept, and the member counted as added).
    @Test func aMemberFilledIntoAValueAdoptedFromACheckDoesNotReplaceAnotherProgramsValueOfIt() throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"a":0,"b":0}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Added(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(writer.wrappedValue == Added())
        store.writeFromOutside(Self.key, json: #"{"a":1}"#)
        try #require(eventually(timeout: 60) { writer.wrappedValue == Added(a: 1, b: 0) })
        store.writeUnreported(Self.key, json: #"{"a":1,"b":9}"#)
        writer.wrappedValue.a = 2
        writer.flush()
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"a":2,"b":9}"#)
    }

    /// A member the type's own decoder filled in when it read is no change of the writer's, read at the start or adopted.
    @Test(arguments: [false, true])
    func aMemberTheTypesDecoderFilledInDoesNotReplaceAnotherProgramsValueOfIt(adopted: Bool) throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: adopted ? #"{"a":0,"b":0}"# : #"{"a":1}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: AddedByItsDecoder(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        _ = writer.wrappedValue
        if adopted { store.writeFromOutside(Self.key, json: #"{"a":1}"#) }
        try #require(eventually(timeout: 60) { writer.wrappedValue == AddedByItsDecoder(a: 1, b: 0) })
        store.writeUnreported(Self.key, json: #"{"a":1,"b":9}"#)
        writer.wrappedValue.a = 2
        writer.flush()
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"a":2,"b":9}"#)
    }

    /// A `null` another program writes for a missing optional, which this program leaves out, is no removal of the
    /// writer's: another program's value of the member, stored meanwhile, stands.
    @Test(arguments: [false, true])
    func aNullTheWriterLeavesOutDoesNotRemoveAnotherProgramsValue(adopted: Bool) throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: adopted ? #"{"a":0}"# : #"{"a":1,"note":null}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Noted(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        _ = writer.wrappedValue
        if adopted { store.writeFromOutside(Self.key, json: #"{"a":1,"note":null}"#) }
        try #require(eventually(timeout: 60) { writer.wrappedValue == Noted(a: 1) })
        store.writeUnreported(Self.key, json: #"{"a":1,"note":"hi"}"#)
        writer.wrappedValue.a = 2
        writer.flush()
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"a":2,"note":"hi"}"#)
    }

    /// A `Double` stored as an integer of more digits than it keeps, which the writer encodes in its shortest spelling,
    /// is no change of the writer's: another program's change of it meanwhile stands.
    @Test func aDoubleStoredAsALongIntegerIsNoChangeOfTheWriters() throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"ratio":12345678901234567890,"y":1}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Ratio(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(writer.wrappedValue == Ratio(ratio: 12_345_678_901_234_567_168, y: 1))
        store.writeUnreported(Self.key, json: #"{"ratio":2,"y":1}"#)
        writer.wrappedValue.y = 2
        writer.flush()
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"ratio":2,"y":2}"#)
    }

    /// Reading bytes whose members the type fills in or writes otherwise, at the start or from a check, writes nothing.
    @Test func readingWhatTheWriterWouldSpellOtherwiseWritesNothing() throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"a":1,"note":null}"#)
        let noted = WLStorage(key: Self.key, defaultValue: Noted(), flushInterval: nil, store: store)
        let added = WLStorage(
            key: Self.key, defaultValue: AddedByItsDecoder(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(noted.wrappedValue == Noted(a: 1))
        #expect(added.wrappedValue == AddedByItsDecoder(a: 1))
        store.writeFromOutside(Self.key, json: #"{"a":3,"note":null}"#)
        #expect(eventually(timeout: 60) { noted.wrappedValue.a == 3 && added.wrappedValue.a == 3 })
        noted.flush()
        added.flush()
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"a":3,"note":null}"#)
    }

    /// The second of three versions, which added `ratio`.
    private struct Rated: Codable, Equatable, Sendable {
        var a = 0
        var b = ""
        var ratio = 0.5
    }

    /// In a directory, a version that filled a member in when it read the first version's file keeps that member out of
    /// its change while the monitor sees the third version write it, then the first version, rolled back to, write over
    /// that: the third version's value stands (the value read was no longer kept, and the filled member counted as added).
    @Test func aFilledMemberStaysOutOfAChangeWhileTheMonitorSeesTwoVersionsWrite() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent(Self.key)
            try Data(#"{"a":1,"b":"x"}"#.utf8).write(to: url)
            let storage = fileStorage(Self.key, in: directory, default: Rated(), flushInterval: nil)
            #expect(storage.wrappedValue == Rated(a: 1, b: "x"))
            storage.wrappedValue.a = 2
            for written in [#"{"a":1,"b":"y","bee":"y","ratio":0.25}"#, #"{"a":1,"b":"z","bee":"y","ratio":0.25}"#] {
                try replaceFromOutside(url, with: written)
                try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            }
            storage.flush()
            #expect(storage.lastError == nil)
            let after = try #require(contents(of: Self.key, in: directory))
            #expect(String(decoding: after, as: UTF8.self) == #"{"a":2,"b":"z","bee":"y","ratio":0.25}"#)
        }
    }

    /// After another program removed the key, a change of the default the storage took goes onto a value another
    /// program stored since, unheard of: only the member changed (the default was written whole over that value). A
    /// store that writes on condition writes the default's change only while nothing is stored.
    @Test func aChangeOfTheDefaultTakenAfterARemovalGoesOntoAValueStoredSince() throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"a":1,"b":2}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Added(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(writer.wrappedValue == Added(a: 1, b: 2))
        store.removeFromOutside(Self.key)
        try #require(eventually(timeout: 60) { writer.wrappedValue == Added() })
        store.writeUnreported(Self.key, json: #"{"a":5,"b":9,"z":[1]}"#)
        writer.wrappedValue.a = 3
        writer.flush()
        #expect(writer.lastError == nil)
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"a":3,"b":9,"z":[1]}"#)
        #expect(eventually(timeout: 60) { writer.wrappedValue == Added(a: 3, b: 9) })
    }

    /// The same in a directory.
    @Test func aChangeOfTheDefaultTakenAfterTheFileWasRemovedGoesOntoAFileWrittenSince() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent(Self.key)
            try Data(#"{"a":1,"b":2}"#.utf8).write(to: url)
            let storage = fileStorage(Self.key, in: directory, default: Added(), flushInterval: nil)
            #expect(storage.wrappedValue == Added(a: 1, b: 2))
            try FileManager.default.removeItem(at: url)
            try #require(eventually(timeout: 60) { storage.wrappedValue == Added() })
            // Written as the change is made: the storage may or may not have heard of it by its write.
            try replaceFromOutside(url, with: #"{"a":5,"b":9,"z":[1]}"#)
            storage.wrappedValue.a = 3
            storage.flush()
            #expect(storage.lastError == nil)
            let after = try #require(contents(of: Self.key, in: directory))
            #expect(String(decoding: after, as: UTF8.self) == #"{"a":3,"b":9,"z":[1]}"#)
        }
    }

    /// A change pending when another program removed the key is still judged against the value it was made on: on a
    /// value stored since, heard of or not, a member it left as it was read keeps the other program's value (judged
    /// against the default, the member read counted as changed and was written over that value).
    @Test(arguments: [false, true])
    func aChangePendingAcrossARemovalIsJudgedAgainstTheValueItWasMadeOn(heard: Bool) throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"a":1,"b":2}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Added(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(writer.wrappedValue == Added(a: 1, b: 2))
        writer.wrappedValue.a = 3
        store.removeFromOutside(Self.key)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(writer) })
        if heard {
            store.writeFromOutside(Self.key, json: #"{"a":1,"b":7}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(writer) })
        } else {
            store.writeUnreported(Self.key, json: #"{"a":1,"b":7}"#)
        }
        writer.flush()
        #expect(writer.lastError == nil)
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"a":3,"b":7}"#)
        #expect(eventually(timeout: 60) { writer.wrappedValue == Added(a: 3, b: 7) })
    }

    /// The same in a directory.
    @Test func aChangePendingAcrossTheFilesRemovalIsJudgedAgainstTheValueItWasMadeOn() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent(Self.key)
            try Data(#"{"a":1,"b":2}"#.utf8).write(to: url)
            let storage = fileStorage(Self.key, in: directory, default: Added(), flushInterval: nil)
            #expect(storage.wrappedValue == Added(a: 1, b: 2))
            storage.wrappedValue.a = 3
            try FileManager.default.removeItem(at: url)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            try replaceFromOutside(url, with: #"{"a":1,"b":7}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            storage.flush()
            #expect(storage.lastError == nil)
            let after = try #require(contents(of: Self.key, in: directory))
            #expect(String(decoding: after, as: UTF8.self) == #"{"a":3,"b":7}"#)
        }
    }

    /// A change of the default made while the default's save finds a value another program stored (after the storage
    /// read nothing) goes onto that value as the member it changed: the default's other members do not replace the
    /// other program's (the change was judged against the value found, and written whole over it).
    @Test func aChangeOfTheDefaultMadeWhileItsSaveFindsAStoredValueGoesOntoThatValue() throws {
        let store = InterceptedStore()
        let storage = Lock<WLStorage<Added>?>(nil)
        let release = DispatchSemaphore(value: 0)
        // The storage's first read finds nothing; the other program stores its value right after it.
        let reached = store.holdNextRead(afterReadingUntil: release)
        let opened = DispatchSemaphore(value: 0)
        startThread {
            let made = WLStorage(key: Self.key, defaultValue: Added(), flushInterval: nil, store: store)
            storage.withLock { $0 = made }
            opened.signal()
        }
        try #require(reached.wait(timeout: .now() + 120) == .success)
        store.base.writeUnreported(Self.key, json: #"{"a":0,"b":9}"#)
        // The default's save finds that value; the change is made before the storage reads it.
        let changed = DispatchSemaphore(value: 0)
        store.afterNextCreate { _ in
            _ = opened.wait(timeout: .now() + 120)
            storage.withLock { $0 }?.wrappedValue.a = 3
            changed.signal()
        }
        release.signal()
        try #require(changed.wait(timeout: .now() + 120) == .success)
        let writer = try #require(storage.withLock { $0 })
        writer.flush()
        #expect(writer.lastError == nil)
        #expect(store.base.stored(Self.key) == #"{"a":3,"b":9}"#)
        #expect(eventually(timeout: 60) { writer.wrappedValue == Added(a: 3, b: 9) })
    }

    /// With nothing stored after a removal, a change of the default is written whole, and a storage of a number too.
    @Test func aChangeOfTheDefaultIsWrittenWholeWhereNothingIsStored() throws {
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"a":1,"b":2}"#)
        store.writeUnreported("number", json: "1")
        let writer = WLStorage(
            key: Self.key, defaultValue: Added(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        let number = WLStorage(key: "number", defaultValue: 0, flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(writer.wrappedValue == Added(a: 1, b: 2))
        #expect(number.wrappedValue == 1)
        store.removeFromOutside(Self.key)
        store.removeFromOutside("number")
        try #require(eventually(timeout: 60) { writer.wrappedValue == Added() && number.wrappedValue == 0 })
        writer.wrappedValue.a = 3
        number.wrappedValue = 4
        writer.flush()
        number.flush()
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"a":3,"b":0}"#)
        #expect(store.stored("number") == "4")
    }
}
