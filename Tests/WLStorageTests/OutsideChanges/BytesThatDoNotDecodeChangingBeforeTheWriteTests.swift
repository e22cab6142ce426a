// Bytes that do not decode, heard of by a live storage, that change again before its next write: the write keeps a
// copy of what it replaces, where it reads what the key holds (a file's field-level write, a store's write on
// condition), once, however often the write is tried.
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct BytesThatDoNotDecodeChangingBeforeTheWriteTests {
    struct Prefs: Codable, Sendable, Equatable {
        var theme: String
        var fontSize: Int
    }

    static let key = "prefs"
    static let initial = #"{"fontSize":15,"theme":"dark"}"#
    static let broken = #"{"fontSize":15,"theme":"dark""#
    static let brokenAgain = #"{"fontSize":15,"theme":"dark"]"#

    static func copies(in store: MemoryStore) throws -> [String] {
        try store.keys().filter { $0.hasPrefix(key + StorageDirectory.movedAsideMarker) }.compactMap(store.stored)
    }

    static func storage(of store: MemoryStore) throws -> WLStorage<Prefs> {
        store.writeFromOutside(key, json: initial)
        let storage = WLStorage(
            key: key, defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        return storage
    }

    /// Heard of, then replaced unheard by other bytes that do not decode: those the write replaces are kept too.
    @Test func aFileWriteKeepsACopyOfOtherBytesThatDoNotDecodeStoredSinceTheCheck() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                try Data(Self.initial.utf8).write(to: url)
                let storage = manualStorage(Self.key, in: directory, default: Prefs(theme: "light", fontSize: 13))
                try #require(storage.wrappedValue.theme == "dark")
                try replaceFromOutside(url, with: Self.broken)
                try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(url, with: Self.brokenAgain)
                    storage.wrappedValue.fontSize = 16
                    storage.flush()
                }
                #expect(!storage.hasPendingChanges)
                let stored = try #require(contents(of: Self.key, in: directory))
                #expect(try JSONDecoder().decode(Prefs.self, from: stored).fontSize == 16)
                let kept = entries(of: directory).filter { $0.hasPrefix(Self.key + StorageDirectory.movedAsideMarker) }
                    .compactMap { contents(of: $0, in: directory) }.map { String(decoding: $0, as: UTF8.self) }
                #expect(kept.contains(Self.brokenAgain), "kept aside: \(kept)")
            }
        }
    }

    /// A store that writes on condition reads what it replaces: bytes that do not decode, stored since the check (or
    /// never heard of), are kept aside before the write goes over them.
    @Test(arguments: [true, false])
    func aStoresWriteOnConditionKeepsACopyOfBytesThatDoNotDecodeStoredSinceTheCheck(heardOfOthersFirst: Bool) throws {
        let store = MemoryStore()
        let storage = try Self.storage(of: store)
        if heardOfOthersFirst {
            store.writeFromOutside(Self.key, json: Self.broken)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        }
        store.writeUnreported(Self.key, json: Self.brokenAgain)
        storage.wrappedValue.fontSize = 16
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let stored = try #require(store.stored(Self.key))
        #expect(try JSONDecoder().decode(Prefs.self, from: Data(stored.utf8)).fontSize == 16)
        let kept = try Self.copies(in: store)
        #expect(kept.contains(Self.brokenAgain), "kept aside: \(kept)")
    }

    /// The write after the copy fails, and is tried again: one copy, not one per attempt.
    @Test(arguments: [true, false])
    func aWriteTriedAgainAfterItFailedKeepsOneCopy(heardOf: Bool) throws {
        let store = MemoryStore()
        let storage = try Self.storage(of: store)
        if heardOf {
            store.writeFromOutside(Self.key, json: Self.broken)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        } else {
            store.writeUnreported(Self.key, json: Self.broken)
        }
        store.failConditionalWrites(2)
        storage.wrappedValue.fontSize = 16
        storage.flush()
        storage.flush()
        #expect(storage.hasPendingChanges)
        storage.flush()
        #expect(!storage.hasPendingChanges)
        #expect(
            try JSONDecoder().decode(Prefs.self, from: Data(try #require(store.stored(Self.key)).utf8)).fontSize == 16)
        #expect(try Self.copies(in: store) == [Self.broken])
    }

    /// A copy that cannot be made (the store refuses every write) leaves the bytes and the change pending; once the
    /// store takes writes again, the copy is kept and the value written.
    @Test func aCopyThatCannotBeMadeLeavesTheBytesAndTheChangePending() throws {
        let store = MemoryStore()
        let storage = try Self.storage(of: store)
        store.writeFromOutside(Self.key, json: Self.broken)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        store.failWrites(true)
        storage.wrappedValue.fontSize = 16
        storage.flush()
        #expect(storage.hasPendingChanges)
        #expect(store.stored(Self.key) == Self.broken)
        #expect(try Self.copies(in: store).isEmpty)
        store.failWrites(false)
        storage.flush()
        #expect(!storage.hasPendingChanges)
        #expect(try Self.copies(in: store) == [Self.broken])
    }

    /// Bytes that do not decode, heard of, then a valid value or nothing stored unheard: the write goes onto that.
    @Test(arguments: [#"{"fontSize":15,"theme":"blue"}"#, nil])
    func bytesThatDoNotDecodeReplacedUnheardBeforeTheWriteLoseNothing(replacement: String?) throws {
        let store = MemoryStore()
        let storage = try Self.storage(of: store)
        store.writeFromOutside(Self.key, json: Self.broken)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        if let replacement {
            store.writeUnreported(Self.key, json: replacement)
        } else {
            store.contents.state.withLock { $0.values[Self.key] = nil }
        }
        storage.wrappedValue.fontSize = 16
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let stored = try JSONDecoder().decode(Prefs.self, from: Data(try #require(store.stored(Self.key)).utf8))
        #expect(stored == Prefs(theme: replacement == nil ? "dark" : "blue", fontSize: 16))
    }

    /// An encrypted store: the copy of bytes that open but do not decode is sealed too, under a key of its own.
    @Test func anEncryptedStoresCopyOfBytesThatDoNotDecodeIsSealed() throws {
        let memory = MemoryStore()
        let encrypted = memory.encrypted(with: try WLStorageEncryptionKey.random())
        try encrypted.write(key: Self.key, data: Data(Self.initial.utf8))
        let storage = WLStorage(
            key: Self.key, defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: encrypted)
        try #require(storage.wrappedValue.theme == "dark")
        try encrypted.write(key: Self.key, data: Data(Self.broken.utf8))
        memory.report(.key(Self.key))
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        storage.wrappedValue.fontSize = 16
        storage.flush()
        #expect(!storage.hasPendingChanges)
        #expect(try encrypted.read(key: Self.key).map { try JSONDecoder().decode(Prefs.self, from: $0).fontSize } == 16)
        let kept = try memory.keys().filter { $0.hasPrefix(Self.key + StorageDirectory.movedAsideMarker) }
        try #require(kept.count == 1, "kept aside: \(kept)")
        #expect(memory.stored(kept[0]) != Self.broken, "the copy was stored in plain text")
        #expect(try encrypted.read(key: kept[0]) == Data(Self.broken.utf8))
    }

    /// A store behind a key prefix: the copy is kept beside the key, under the prefix once.
    @Test func aPrefixedStoresCopyIsKeptUnderThePrefixOnce() throws {
        let memory = MemoryStore()
        let prefixed = memory.prefixed("app/")
        memory.writeFromOutside("app/" + Self.key, json: Self.initial)
        let storage = WLStorage(
            key: Self.key, defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: prefixed)
        try #require(storage.wrappedValue.theme == "dark")
        memory.writeFromOutside("app/" + Self.key, json: Self.broken)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
        storage.wrappedValue.fontSize = 16
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let kept = try memory.keys().filter { $0.contains(StorageDirectory.movedAsideMarker) }
        #expect(kept.count == 1 && kept.allSatisfy { $0.hasPrefix("app/" + Self.key) }, "kept aside: \(kept)")
    }

    /// Two storages of one key in one process, and a storage released right after its set: one copy, and the value.
    @Test func aStorageReleasedRightAfterItsSetKeepsOneCopyBesideAnotherStorageOfTheKey() throws {
        let store = MemoryStore()
        let first = try Self.storage(of: store)
        var second: WLStorage<Prefs>? = WLStorage(
            key: Self.key, defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
        store.writeFromOutside(Self.key, json: Self.broken)
        try #require(eventually(timeout: 60) { hasHeardWhatIsStored(first) })
        second?.wrappedValue.fontSize = 16
        second = nil
        first.flush()
        #expect(!first.hasPendingChanges)
        let stored = try #require(store.stored(Self.key))
        #expect(try JSONDecoder().decode(Prefs.self, from: Data(stored.utf8)).fontSize == 16)
        #expect(try Self.copies(in: store) == [Self.broken])
    }

    /// A full disk fails the copy of a file's bytes that do not decode: the file and the change are left; once the
    /// disk has room, one copy is kept and the value written.
    @Test func aFileCopyOnAFullDiskLeavesTheFileAndTheChangePending() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent(Self.key)
            try Data(Self.initial.utf8).write(to: url)
            let storage = manualStorage(Self.key, in: directory, default: Prefs(theme: "light", fontSize: 13))
            try #require(storage.wrappedValue.theme == "dark")
            try replaceFromOutside(url, with: Self.broken)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            storage.wrappedValue.fontSize = 16
            withFaultPlan(
                in: directory, fileName: Self.key, standing: { call, _ in call == .write ? .fail(ENOSPC) : nil }
            ) {
                _ in
                storage.flush()
            }
            #expect(storage.hasPendingChanges)
            #expect(contents(of: Self.key, in: directory) == Data(Self.broken.utf8))
            storage.flush()
            #expect(!storage.hasPendingChanges)
            let kept = entries(of: directory).filter { $0.hasPrefix(Self.key + StorageDirectory.movedAsideMarker) }
            #expect(kept.compactMap { contents(of: $0, in: directory) } == [Data(Self.broken.utf8)], "kept: \(kept)")
            #expect(temporaryFiles(in: directory).isEmpty)
        }
    }
}
