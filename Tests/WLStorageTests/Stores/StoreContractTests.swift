// Every store of the package, and the test stores, against the store contract (StoreContract in the test support).
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.onTestThreads) struct StoreContractTests {
    /// The keys of ``StoreContract/unusualKeys`` that a directory stores under their hash, which its `keys()` cannot
    /// tell from the file name and does not list (as documented).
    static let hashedInADirectory: Set<String> = Set(
        StoreContract.unusualKeys.filter { !["plain", ".hidden"].contains($0) })

    @Test func theDirectoryStoreKeepsTheContract() throws {
        try withTemporaryDirectory { directory in
            let store = WLStorageDirectoryStore(url: directory)
            try StoreContract.check(
                store, other: WLStorageDirectoryStore(url: directory), unlisted: Self.hashedInADirectory
            ) { key, data in
                try replaceFromOutside(
                    directory.appendingPathComponent(key), with: String(decoding: data, as: UTF8.self))
            }
        }
    }

    @Test func aPrefixedStoreKeepsTheContract() throws {
        try withTemporaryDirectory { directory in
            let base = WLStorageDirectoryStore(url: directory)
            // A key of the base outside the prefix is none of the prefixed store's keys.
            try base.write(key: "elsewhere", data: Data("0".utf8))
            let store = WLStoragePrefixedStore(base: base, prefix: "app.")
            try StoreContract.check(
                store, other: WLStoragePrefixedStore(base: WLStorageDirectoryStore(url: directory), prefix: "app."),
                unlisted: Self.hashedInADirectory
            ) { key, data in
                try replaceFromOutside(
                    directory.appendingPathComponent("app." + key), with: String(decoding: data, as: UTF8.self))
            }
            #expect(try base.read(key: "elsewhere") == Data("0".utf8))
        }
    }

    @Test func anEncryptedStoreKeepsTheContract() throws {
        try withTemporaryDirectory { directory in
            let key = try WLStorageEncryptionKey(bytes: (0..<32).map { UInt8($0) })
            let store = WLStorageEncryptedStore(WLStorageDirectoryStore(url: directory), key: key)
            let other = WLStorageEncryptedStore(WLStorageDirectoryStore(url: directory), key: key)
            let elsewhere = WLStorageEncryptedStore(WLStorageDirectoryStore(url: directory), key: key)
            try StoreContract.check(store, other: other, unlisted: Self.hashedInADirectory) { key, data in
                try elsewhere.write(key: key, data: data)
            }
        }
    }

    @Test func theVersionedTestStoreKeepsTheContract() throws {
        let store = VersionedMemoryStore()
        try StoreContract.check(store, other: store) { key, data in
            store.writeFromOutside(key, json: String(decoding: data, as: UTF8.self))
        }
    }

    @Test func theMemoryTestStoreKeepsTheContract() throws {
        let store = MemoryStore()
        try StoreContract.check(store, other: MemoryStore(sharing: store)) { key, data in
            try MemoryStore(replicaOf: store).write(key: key, data: data)
            store.report(.key(key))
        }
    }
}
