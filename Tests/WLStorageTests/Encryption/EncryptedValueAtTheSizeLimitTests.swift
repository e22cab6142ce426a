// A value as large as ``WLStorageSystem/maximumValueSize`` allows, encrypted in a directory: its file is larger than the
// limit by what encryption adds, and every path that reads it again (a write on condition, a removal on condition)
// reads it up to ``WLStorageSystem/maximumStoredValueSize``, as a storage's own read does.
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput, .serialized) struct EncryptedValueAtTheSizeLimitTests {
    private let key = try! WLStorageEncryptionKey.random()

    /// A string whose JSON is `WLStorageSystem.maximumValueSize` bytes less `short`, of `letter`.
    private static func largest(_ letter: Character, short: Int = 0) -> String {
        String(repeating: letter, count: WLStorageSystem.maximumValueSize - 2 - short)
    }

    private static func sealedSize(_ directory: URL, _ name: String) throws -> Int {
        try #require(
            FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(name).path)[.size] as? Int)
    }

    /// A storage replaces a value of the largest size with another, and an update replaces that one.
    @Test func aStorageReplacesAValueOfTheLargestSize() throws {
        try withTemporaryDirectory { directory in
            let store = WLStorageEncryptedStore(.directory(directory), key: key)
            let storage = WLStorage(key: "big", defaultValue: "", flushInterval: nil, store: store)
            storage.wrappedValue = Self.largest("a")
            storage.flush()
            #expect(storage.lastError == nil)
            #expect(try Self.sealedSize(directory, "big") > WLStorageSystem.maximumValueSize)
            storage.wrappedValue = Self.largest("b")
            storage.flush()
            storage.update { $0 = Self.largest("d") }
            storage.flush()
            #expect(storage.lastError == nil, "\(storage.lastError.map { "\($0)" } ?? "")")
            #expect(!storage.hasPendingChanges)
            let stored = try #require(try store.read(key: "big"))
            #expect(stored == (try JSONEncoder().encode(Self.largest("d"))))
        }
    }

    /// A removal on condition of the largest value's bytes removes it, and one of other bytes leaves it.
    @Test func aRemovalOnConditionOfTheLargestValueReadsItsSealedFile() throws {
        try withTemporaryDirectory { directory in
            let store = WLStorageEncryptedStore(.directory(directory), key: key)
            let value = try JSONEncoder().encode(Self.largest("c"))
            try store.write(key: "big", data: value)
            #expect(try Self.sealedSize(directory, "big") > WLStorageSystem.maximumValueSize)
            #expect(try store.remove(key: "big", ifItHolds: Data(#""other""#.utf8)) == false)
            #expect(try store.read(key: "big") == value)
            #expect(try store.remove(key: "big", ifItHolds: value))
            #expect(try store.read(key: "big") == nil)
        }
    }

    /// The directory store reads what a store is asked to hold for one value, as every store does, and no more.
    @Test func theDirectoryStoreReadsUpToTheLargestStoredValue() throws {
        try withTemporaryDirectory { directory in
            let store = WLStorageDirectoryStore.directory(directory)
            let largest = Data(repeating: UInt8(ascii: "x"), count: WLStorageSystem.maximumStoredValueSize)
            try store.write(key: "k", data: largest)
            #expect(try store.read(key: "k") == largest)
            try store.write(key: "k", data: largest + Data("x".utf8))
            #expect {
                try store.read(key: "k")
            } throws: { ($0 as? WLStorageError)?.code == .valueTooLarge }
        }
    }

    /// Through an encrypted store over an encrypted store, whose file holds what both layers add: a removal on
    /// condition of the largest value's bytes removes it, and one of other bytes leaves it.
    @Test func aRemovalOnConditionThroughTwoEncryptedStoresReadsTheFileOfBothLayers() throws {
        try withTemporaryDirectory { directory in
            let inner = WLStorageEncryptedStore(.directory(directory), key: try WLStorageEncryptionKey.random())
            let nested = WLStorageEncryptedStore(inner, key: key)
            let value = try JSONEncoder().encode(Self.largest("c"))
            try nested.write(key: "big", data: value)
            #expect(try Self.sealedSize(directory, "big") > WLStorageSystem.maximumStoredValueSize)
            #expect(try nested.read(key: "big") == value)
            #expect(try nested.remove(key: "big", ifItHolds: Data(#""other""#.utf8)) == false)
            #expect(try nested.remove(key: "big", ifItHolds: value))
            #expect(try nested.read(key: "big") == nil)
        }
    }

    /// Through an encrypted store over an encrypted store, a value of the largest size sealed under a previous key is
    /// sealed again under the current one when a storage opens it (a rewrite on condition of the file's bytes).
    @Test func aValueOfTheLargestSizeUnderAPreviousKeyIsSealedAgainThroughTwoEncryptedStores() throws {
        try withTemporaryDirectory { directory in
            let inner = WLStorageEncryptedStore(.directory(directory), key: try WLStorageEncryptionKey.random())
            let previous = try WLStorageEncryptionKey.random()
            let value = try JSONEncoder().encode(Self.largest("e"))
            try WLStorageEncryptedStore(inner, key: previous).write(key: "big", data: value)
            let storage = WLStorage(
                key: "big", defaultValue: "", flushInterval: nil,
                store: WLStorageEncryptedStore(inner, key: key, previousKeys: [previous]))
            #expect(storage.wrappedValue == Self.largest("e"))
            storage.flush()
            let current = WLStorageEncryptedStore(inner, key: key)
            var readBack: Data?
            #expect(
                eventually(timeout: 30) {
                    readBack = try? current.read(key: "big")
                    return readBack == value
                }, "\(storage.lastError.map { "\($0)" } ?? "no error")")
        }
    }
}
