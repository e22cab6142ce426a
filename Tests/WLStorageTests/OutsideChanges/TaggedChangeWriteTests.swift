// A change written field by field onto a key of a store of a program's own that keeps versions and tags writes, seen
// through an encrypted store (its key, or a new key with the old one as a previous key) and a prefixed one, or a store
// that cannot tag writes now and then: a write whose answer was lost is told made or not by its tag, and not made again
// over another program's newer change; where the store cannot tag, bytes are compared (Guarantees.md).
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput, .serialized) struct TaggedChangeWriteTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    static let key = "pair"

    /// How a storage sees the ``VersionedMemoryStore`` that holds the key.
    enum Seen: String, CaseIterable, CustomTestStringConvertible {
        case plain, encrypted, encryptedUnderANewKey, prefixed
        var testDescription: String { rawValue }
    }

    static let oldKey = try! WLStorageEncryptionKey(bytes: [UInt8](repeating: 7, count: 32))
    static let newKey = try! WLStorageEncryptionKey(bytes: [UInt8](repeating: 9, count: 32))

    /// The store a storage of `seen` uses over `shared`, and the one another program writes through (the old key).
    static func stores(_ seen: Seen, over shared: VersionedMemoryStore) -> (
        own: any WLStorageStore, other: any WLStorageStore
    ) {
        switch seen {
        case .plain: (shared, shared)
        case .encrypted: (shared.encrypted(with: oldKey), shared.encrypted(with: oldKey))
        case .encryptedUnderANewKey:
            (shared.encrypted(with: newKey, previousKeys: [oldKey]), shared.encrypted(with: oldKey))
        case .prefixed: (shared.prefixed("app."), shared.prefixed("app."))
        }
    }

    /// A storage of {"a":1,"b":1} sets `a = 2`; its write is made and loses its answer while another program stores
    /// `outside`, which it read after that write: the key and the storage end with `outside`, nothing pending.
    @Test(arguments: Seen.allCases, [#"{"a":3,"b":1}"#, #"{"a":2,"b":5}"#, #"{"a":1,"b":5}"#])
    func anotherProgramsChangeOverAWriteFoundMadeIsKept(_ seen: Seen, outside: String) throws {
        let shared = VersionedMemoryStore()
        let (own, other) = Self.stores(seen, over: shared)
        try other.write(key: Self.key, data: Data(#"{"a":1,"b":1}"#.utf8))
        let storage = WLStorage(key: Self.key, defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: own)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        shared.loseNextAnswer(.afterTheWrite) { try? other.write(key: Self.key, data: Data(outside.utf8)) }
        storage.wrappedValue.a = 2
        storage.flush()
        storage.flush()
        let expected = try JSONDecoder().decode(Pair.self, from: Data(outside.utf8))
        let held = try #require(try own.read(key: Self.key))
        #expect(try JSONDecoder().decode(Pair.self, from: held) == expected)
        #expect(eventually(timeout: 60) { storage.wrappedValue == expected }, "holds \(storage.wrappedValue)")
        #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
    }

    /// A store that cannot tag writes every other time it is asked for a key's version (as a PostgreSQL role whose
    /// privileges on the tags' table come and go would).
    final class SometimesUntagged: WLStorageVersionedStore {
        let base = VersionedMemoryStore()
        let reason = "no tags now " + UUID().uuidString
        private let asked = Lock(0)
        var identity: String { base.identity }

        func read(key: String) throws -> Data? { try base.read(key: key) }
        func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
        func remove(key: String) throws { try base.remove(key: key) }
        func keys() throws -> [String] { try base.keys() }
        func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
            try base.write(key: key, data: data, ifItHolds: expected)
        }
        func readVersioned(key: String) throws -> WLStorageVersionedRead {
            let odd = asked.withLock { asked in
                defer { asked += 1 }
                return asked % 2 == 1
            }
            return odd
                ? .untagged(WLStorageError(code: .writeFailed, message: reason)) : try base.readVersioned(key: key)
        }
        func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
            -> WLStorageTaggedWriteResult
        {
            try base.write(key: key, data: data, ifVersion: version, tag: tag)
        }
        func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
            try base.trace(of: tag, key: key)
        }
    }

    /// Changes and updates of a store that cannot tag writes every other time: each is made (a change on condition of
    /// bytes when it cannot tag), another program's change of another field is kept, and an update reports once that
    /// the store cannot tag writes.
    @Test func aStoreThatCannotTagWritesNowAndThenHasEveryChangeMadeAndAnUpdateReportsItOnce() throws {
        let store = SometimesUntagged()
        store.base.writeFromOutside(Self.key, json: #"{"a":0,"b":0}"#)
        let storage = WLStorage(key: Self.key, defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
        try #require(storage.wrappedValue == Pair(a: 0, b: 0))
        for round in 1...6 {
            storage.wrappedValue.a = round
            storage.flush()
            storage.update { $0.b += 1 }
            storage.flush()
            #expect(storage.lastError == nil || storage.lastError?.message == store.reason)
        }
        let held = try JSONDecoder().decode(Pair.self, from: try #require(try store.base.read(key: Self.key)))
        #expect(held == Pair(a: 6, b: 6))
        #expect(storage.wrappedValue == Pair(a: 6, b: 6))
        #expect(!storage.hasPendingChanges)
        #expect(ReportedErrors.errors(where: { $0.message.contains(store.reason) }).count == 1)
    }
}
