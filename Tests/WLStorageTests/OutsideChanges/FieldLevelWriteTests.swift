// A storage's write carries the fields its value changed against what it read, onto what the file holds when it is
// written: another program's change of other fields, made since and seen or not, is kept (Guarantees.md: Sharing a
// file).
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct FieldLevelWriteTests {
    struct Window: Codable, Sendable, Equatable {
        var width: Int
        var height: Int
    }

    struct Preferences: Codable, Sendable, Equatable {
        var theme: String
        var fontSize: Int
        var note: String?
        var window = Window(width: 800, height: 600)
        var tags: [String] = []
    }

    static let key = "preferences"
    static let initial = #"{"fontSize":15,"tags":["a"],"theme":"dark","window":{"height":600,"width":800}}"#
    static let defaultValue = Preferences(theme: "light", fontSize: 13)

    /// The file's members, decoded.
    static func stored(in directory: URL) throws -> Preferences {
        let data = try #require(contents(of: key, in: directory))
        return try JSONDecoder().decode(Preferences.self, from: data)
    }

    /// A storage of the key in `directory`, which holds ``initial``, whose writes happen only when it is flushed.
    static func openedStorage(in directory: URL) throws -> WLStorage<Preferences> {
        try Data(initial.utf8).write(to: directory.appendingPathComponent(key))
        let storage = manualStorage(key, in: directory, default: defaultValue)
        try #require(storage.wrappedValue.theme == "dark")
        return storage
    }

    @Test func aChangeWrittenAfterAnotherProgramsChangeOfAnotherFieldKeepsBoth() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let storage = try Self.openedStorage(in: directory)
                // The other program's change is not heard of before the write: the write finds it in the file.
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(
                        directory.appendingPathComponent(Self.key),
                        with: #"{"fontSize":15,"tags":["a"],"theme":"blue","window":{"height":600,"width":800}}"#)
                    storage.wrappedValue.fontSize = 16
                    storage.flush()
                }
                #expect(storage.lastError == nil)
                let expected = Preferences(theme: "blue", fontSize: 16, tags: ["a"])
                #expect(try Self.stored(in: directory) == expected)
                // The storage takes the other program's change too.
                #expect(storage.wrappedValue == expected)
                #expect(!storage.hasPendingChanges)
            }
        }
    }

    @Test func aChangePendingWhenAnotherProgramsChangeIsSeenIsWrittenOntoIt() throws {
        try withTemporaryDirectory { directory in
            let storage = try Self.openedStorage(in: directory)
            storage.wrappedValue.fontSize = 16
            try replaceFromOutside(
                directory.appendingPathComponent(Self.key),
                with: #"{"fontSize":15,"tags":["a"],"theme":"blue","window":{"height":600,"width":800}}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            // Seen while the change was pending: the value keeps the change until it is written.
            #expect(storage.wrappedValue.fontSize == 16)
            storage.flush()
            let expected = Preferences(theme: "blue", fontSize: 16, tags: ["a"])
            #expect(try Self.stored(in: directory) == expected)
            #expect(storage.wrappedValue == expected)
        }
    }

    @Test func whenTwoProgramsChangeOneFieldTheOneThatWritesLastSetsIt() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let storage = try Self.openedStorage(in: directory)
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(
                        directory.appendingPathComponent(Self.key),
                        with: #"{"fontSize":20,"tags":["b","c"],"theme":"blue","window":{"height":600,"width":1024}}"#)
                    storage.wrappedValue.fontSize = 16
                    storage.wrappedValue.tags.append("z")
                    storage.wrappedValue.window.height = 700
                    storage.flush()
                }
                // fontSize: this write's. theme: the other's. An array is taken whole: this write's. Nested objects are
                // merged member by member.
                let expected = Preferences(
                    theme: "blue", fontSize: 16, window: Window(width: 1024, height: 700), tags: ["a", "z"])
                #expect(try Self.stored(in: directory) == expected)
                #expect(storage.wrappedValue == expected)
            }
        }
    }

    @Test func aFieldRemovedByTheWriteIsRemovedAndOneAddedByTheOtherProgramIsKept() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                try Data(Self.initial.utf8).write(to: directory.appendingPathComponent(Self.key))
                let storage = manualStorage(
                    Self.key, in: directory, default: Self.defaultValue)
                storage.wrappedValue.note = "first"
                storage.flush()
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    // Another version of the program adds a field this one does not know, and changes the theme.
                    try replaceFromOutside(
                        directory.appendingPathComponent(Self.key),
                        with: #"{"fontSize":15,"lineSpacing":2,"note":"first","tags":["a"],"theme":"blue","#
                            + #""window":{"height":600,"width":800}}"#)
                    storage.wrappedValue.note = nil
                    storage.flush()
                }
                let data = try #require(contents(of: Self.key, in: directory))
                let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
                #expect(object["note"] == nil)
                #expect(object["lineSpacing"] as? Int == 2)
                #expect(object["theme"] as? String == "blue")
                #expect(storage.wrappedValue == Preferences(theme: "blue", fontSize: 15, tags: ["a"]))
            }
        }
    }

    @Test func aWriteThatChangesNothingOfWhatAnotherProgramStoredLeavesItsFileInPlace() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let storage = try Self.openedStorage(in: directory)
                let url = directory.appendingPathComponent(Self.key)
                let other = #"{"fontSize":15,"tags":["a"],"theme":"blue","window":{"height":600,"width":800}}"#
                let inode = try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(url, with: other)
                    let inode = try FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber]
                    // Set to what it read: no field changed.
                    storage.wrappedValue = storage.wrappedValue
                    storage.flush()
                    return inode as? UInt64
                }
                #expect(
                    try FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber] as? UInt64 == inode)
                #expect(contents(of: Self.key, in: directory) == Data(other.utf8))
                #expect(storage.wrappedValue.theme == "blue")
                #expect(!storage.hasPendingChanges)
            }
        }
    }

    /// After a write outage, the retry of an older change must not undo a newer change of another field that another
    /// program wrote once the outage ended.
    @Test func aChangeRetriedAfterAWriteOutageKeepsTheNewerChangeAnotherProgramWroteFirst() throws {
        try withTemporaryDirectory { directory in
            let storage = try Self.openedStorage(in: directory)
            let reads = Switch(false)
            let writes = Switch(true)
            installReadWriteFaults(in: directory, name: Self.key, reads: reads, writes: writes)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            storage.wrappedValue.theme = "blue"
            storage.flush()
            #expect(storage.hasPendingChanges)
            #expect(writes.tallied > 0)
            writes.set(false)
            // The other program's change, made after this one's, is written first once writes work again.
            try replaceFromOutside(
                directory.appendingPathComponent(Self.key),
                with: #"{"fontSize":20,"tags":["a"],"theme":"dark","window":{"height":600,"width":800}}"#)
            storage.flush()
            #expect(storage.lastError == nil)
            let expected = Preferences(theme: "blue", fontSize: 20, tags: ["a"])
            #expect(try Self.stored(in: directory) == expected)
            #expect(storage.wrappedValue == expected)
        }
    }

    /// A store writes the whole value; the members another version added, seen while the change was pending, are kept.
    @Test func aStoresWriteKeepsTheMembersAnotherVersionAddedWhileTheChangeWasPending() throws {
        let store = MemoryStore()
        store.writeFromOutside(Self.key, json: Self.initial)
        let storage = WLStorage(key: Self.key, defaultValue: Self.defaultValue, flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        storage.wrappedValue.fontSize = 16
        store.writeFromOutside(
            Self.key,
            json: #"{"fontSize":15,"lineSpacing":2,"tags":["a"],"theme":"dark","window":{"height":600,"width":800}}"#)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        storage.flush()
        let data = Data(try #require(store.stored(Self.key)).utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["lineSpacing"] as? Int == 2)
        #expect(object["fontSize"] as? Int == 16)
    }

    /// A store that writes on condition takes a change onto another program's change that its feed told of, whether the
    /// storage's own flush writes it or a flush of every storage of the store.
    @Test(arguments: [false, true])
    func aStoresWriteGoesOntoAnotherProgramsChangeItsFeedToldOf(flushingEveryStorage: Bool) throws {
        let store = MemoryStore()
        store.writeFromOutside(Self.key, json: Self.initial)
        let storage = WLStorage(key: Self.key, defaultValue: Self.defaultValue, flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        storage.wrappedValue.fontSize = 16
        store.writeFromOutside(
            Self.key, json: #"{"fontSize":15,"tags":["a"],"theme":"blue","window":{"height":600,"width":800}}"#)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        if flushingEveryStorage { flushAllStores([store]) }
        storage.flush()
        let expected = Preferences(theme: "blue", fontSize: 16, tags: ["a"])
        let stored = try JSONDecoder().decode(Preferences.self, from: Data(try #require(store.stored(Self.key)).utf8))
        #expect(stored == expected)
        #expect(storage.wrappedValue == expected)
        #expect(!storage.hasPendingChanges)
    }

    /// A store that writes on condition writes a change only while the key holds what the value was read from: another
    /// program's change of another field, which its feed has not told of yet, is read and the change goes onto it,
    /// whether the storage's own flush writes it or a flush of every storage of the store (at exit, on a signal).
    @Test(arguments: [false, true])
    func aStoresWriteGoesOntoAnotherProgramsChangeItsFeedHasNotToldOfYet(flushingEveryStorage: Bool) throws {
        let store = MemoryStore()
        store.writeFromOutside(Self.key, json: Self.initial)
        let storage = WLStorage(key: Self.key, defaultValue: Self.defaultValue, flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        storage.wrappedValue.fontSize = 16
        store.writeUnreported(
            Self.key, json: #"{"fontSize":15,"tags":["a"],"theme":"blue","window":{"height":600,"width":800}}"#)
        if flushingEveryStorage { flushAllStores([store]) }
        storage.flush()
        let expected = Preferences(theme: "blue", fontSize: 16, tags: ["a"])
        let stored = try JSONDecoder().decode(Preferences.self, from: Data(try #require(store.stored(Self.key)).utf8))
        #expect(stored == expected)
        #expect(eventually { storage.wrappedValue == expected }, "holds \(storage.wrappedValue)")
        #expect(!storage.hasPendingChanges)
        // With nothing changed in between, the next change is one write on condition, with no read before it.
        let reads = store.reads
        storage.wrappedValue.fontSize = 17
        storage.flush()
        #expect(
            try JSONDecoder().decode(Preferences.self, from: Data(try #require(store.stored(Self.key)).utf8))
                == Preferences(theme: "blue", fontSize: 17, tags: ["a"]))
        #expect(store.reads == reads)
    }
}
