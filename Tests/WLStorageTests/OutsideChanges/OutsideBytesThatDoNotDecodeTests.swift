// Bytes another program stores after a storage opened, which do not decode (an operator's edit with a typo, say), are
// left as they are when the storage hears of them; its next write replaces them, and a copy of them is kept aside
// first, as bytes that do not decode are kept at open.
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct OutsideBytesThatDoNotDecodeTests {
    struct Prefs: Codable, Sendable, Equatable {
        var theme: String
        var fontSize: Int
    }

    static let key = "prefs"
    static let broken = #"{"fontSize":15,"theme":"dark""#

    /// The names in `directory` of copies kept aside for `key`.
    static func keptAside(in directory: URL) -> [String] {
        entries(of: directory).filter { $0.hasPrefix(key + StorageDirectory.movedAsideMarker) }
    }

    /// A file holding an object, then another program's broken edit, heard of: the next set replaces it, a copy kept.
    @Test func aSetOverAnEditThatIsNotJSONKeepsACopyOfTheEdit() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent(Self.key)
            try Data(#"{"fontSize":15,"theme":"dark"}"#.utf8).write(to: url)
            let storage = manualStorage(Self.key, in: directory, default: Prefs(theme: "light", fontSize: 13))
            try #require(storage.wrappedValue.theme == "dark")
            try replaceFromOutside(url, with: Self.broken)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            storage.wrappedValue.fontSize = 16
            storage.flush()
            #expect(!storage.hasPendingChanges)
            let stored = try #require(contents(of: Self.key, in: directory))
            #expect(try JSONDecoder().decode(Prefs.self, from: stored) == Prefs(theme: "dark", fontSize: 16))
            let kept = Self.keptAside(in: directory)
            try #require(kept.count == 1, "kept aside: \(kept)")
            #expect(contents(of: kept[0], in: directory) == Data(Self.broken.utf8))
            #expect(!ReportedErrors.errors(under: directory).filter { $0.message.contains(kept[0]) }.isEmpty)
        }
    }

    /// A value written whole (a number has no fields to merge) keeps the copy too.
    @Test func aSetOfANumberOverBytesThatDoNotDecodeKeepsACopyOfThem() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("count")
            try Data("1".utf8).write(to: url)
            let storage = manualStorage("count", in: directory, default: 0)
            try #require(storage.wrappedValue == 1)
            try replaceFromOutside(url, with: "2x")
            // Heard of once a check has read them (a check counted may have read the file before the replacement).
            try #require(eventually(timeout: 60) { storage.lastError?.code == .decodingFailed })
            storage.wrappedValue = 3
            storage.flush()
            #expect(contents(of: "count", in: directory) == Data("3".utf8))
            let kept = entries(of: directory).filter { $0.hasPrefix("count" + StorageDirectory.movedAsideMarker) }
            try #require(kept.count == 1, "kept aside: \(kept)")
            #expect(contents(of: kept[0], in: directory) == Data("2x".utf8))
        }
    }

    /// Bytes that do not decode, then a value that does, both heard of before the write: nothing is kept aside.
    @Test func bytesThatDoNotDecodeReplacedByAValueBeforeTheWriteAreNotKept() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent(Self.key)
            try Data(#"{"fontSize":15,"theme":"dark"}"#.utf8).write(to: url)
            let storage = manualStorage(Self.key, in: directory, default: Prefs(theme: "light", fontSize: 13))
            try #require(storage.wrappedValue.theme == "dark")
            try replaceFromOutside(url, with: Self.broken)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            try replaceFromOutside(url, with: #"{"fontSize":15,"theme":"blue"}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            storage.wrappedValue.fontSize = 16
            storage.flush()
            #expect(Self.keptAside(in: directory).isEmpty)
            #expect(storage.wrappedValue == Prefs(theme: "blue", fontSize: 16))
        }
    }

    /// A store that writes on condition: its feed tells of bytes that do not decode; the write, the storage's own or
    /// in a flush of every storage of the store, keeps a copy of them under another key first.
    @Test(arguments: [false, true])
    func aStoresWriteOverBytesThatDoNotDecodeKeepsACopyOfThem(flushingEveryStorage: Bool) throws {
        let store = MemoryStore()
        store.writeFromOutside(Self.key, json: #"{"fontSize":15,"theme":"dark"}"#)
        let storage = WLStorage(
            key: Self.key, defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        store.writeFromOutside(Self.key, json: Self.broken)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        storage.wrappedValue.fontSize = 16
        if flushingEveryStorage { flushAllStores([store]) }
        storage.flush()
        let stored = try #require(store.stored(Self.key))
        #expect(try JSONDecoder().decode(Prefs.self, from: Data(stored.utf8)) == Prefs(theme: "dark", fontSize: 16))
        let kept = try store.keys().filter { $0.hasPrefix(Self.key + StorageDirectory.movedAsideMarker) }
        try #require(kept.count == 1, "kept aside: \(kept)")
        #expect(store.stored(kept[0]) == Self.broken)
    }

    /// A second check that finds the same bytes (a feed that tells of a change twice) leaves the copy to the write.
    @Test func aSecondCheckOfTheSameBytesStillKeepsACopyAtTheWrite() throws {
        let store = MemoryStore()
        store.writeFromOutside(Self.key, json: #"{"fontSize":15,"theme":"dark"}"#)
        let storage = WLStorage(
            key: Self.key, defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        store.writeFromOutside(Self.key, json: Self.broken)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        // Counted once the bytes were heard: a check asked for since reads them again.
        let checks = storage.cell.externalChecks
        store.report(.key(Self.key))
        try #require(eventually(timeout: 60) { storage.cell.externalChecks > checks && hasNoCheckLeft(storage) })
        storage.wrappedValue.fontSize = 16
        storage.flush()
        let kept = try store.keys().filter { $0.hasPrefix(Self.key + StorageDirectory.movedAsideMarker) }
        try #require(kept.count == 1, "kept aside: \(kept)")
        #expect(store.stored(kept[0]) == Self.broken)
    }

    /// An update that reads bytes that do not decode is made in this process and written as a set: over a copy kept.
    @Test func anUpdateOverBytesThatDoNotDecodeKeepsACopyOfThem() throws {
        let store = MemoryStore()
        store.writeFromOutside(Self.key, json: #"{"fontSize":15,"theme":"dark"}"#)
        let storage = WLStorage(
            key: Self.key, defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        store.writeUnreported(Self.key, json: Self.broken)
        storage.update { $0.fontSize = 16 }
        storage.flush()
        let stored = try #require(store.stored(Self.key))
        #expect(try JSONDecoder().decode(Prefs.self, from: Data(stored.utf8)).fontSize == 16)
        let kept = try store.keys().filter { $0.hasPrefix(Self.key + StorageDirectory.movedAsideMarker) }
        try #require(kept.count == 1, "kept aside: \(kept)")
        #expect(store.stored(kept[0]) == Self.broken)
    }
}
