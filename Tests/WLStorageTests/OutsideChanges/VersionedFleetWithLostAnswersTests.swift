// Programs of three versions of a type (a field renamed in version 2, one added in version 3, then a rollback to
// version 2) change one key of a store of their own that keeps versions and tags writes, each through its own handle,
// while their writes lose their answers: no field another program changed is lost, and no change is made again over
// a newer one (Guarantees.md: Several programs, one file).
import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput, .serialized) struct VersionedFleetWithLostAnswersTests {
    struct V1: Codable, Sendable, Equatable {
        var theme = "light"
        var fontSize = 13
    }

    struct V2: Codable, Sendable, Equatable {
        var colorScheme = "light"
        var fontSize = 13
    }

    struct V3: Codable, Sendable, Equatable {
        var colorScheme = "light"
        var fontSize = 13
        var lineSpacing = 1.0
    }

    static let key = "settings"

    /// One program's handle of a ``VersionedMemoryStore`` the fleet shares: the same rows, an identity of its own (its
    /// storages are cells of their own) and no feed, so that it hears of other programs' changes only by writing.
    final class Program: WLStorageVersionedStore {
        let shared: VersionedMemoryStore
        let identity = "program:" + UUID().uuidString

        init(_ shared: VersionedMemoryStore) { self.shared = shared }

        func read(key: String) throws -> Data? { try shared.read(key: key) }
        func write(key: String, data: Data) throws { try shared.write(key: key, data: data) }
        func remove(key: String) throws { try shared.remove(key: key) }
        func keys() throws -> [String] { try shared.keys() }
        func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
            try shared.write(key: key, data: data, ifItHolds: expected)
        }
        func readVersioned(key: String) throws -> WLStorageVersionedRead { try shared.readVersioned(key: key) }
        func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
            -> WLStorageTaggedWriteResult
        {
            try shared.write(key: key, data: data, ifVersion: version, tag: tag)
        }
        func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
            try shared.trace(of: tag, key: key)
        }
    }

    static let renamed: [WLStorageMigration<V2>] = [.renamed(from: "theme", to: "colorScheme")]
    static let renamedToo: [WLStorageMigration<V3>] = [.renamed(from: "theme", to: "colorScheme")]

    /// The members of what the shared store holds.
    static func object(_ shared: VersionedMemoryStore) throws -> [String: Any] {
        let text = try #require(shared.stored(key))
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// Each program's write is made and loses its answer while the next program changes another field (or the same
    /// one, set after it): every change stays, and none is made again over the newer change of its field.
    @Test func threeVersionsAndARollbackWhoseWritesLoseTheirAnswersKeepEveryNewerChange() throws {
        let shared = VersionedMemoryStore()
        shared.writeFromOutside(Self.key, json: #"{"fontSize":13,"theme":"dark"}"#)
        let p1 = WLStorage(key: Self.key, defaultValue: V1(), flushInterval: nil, store: Program(shared))
        let p2 = WLStorage(
            key: Self.key, defaultValue: V2(), flushInterval: nil, store: Program(shared), migrations: Self.renamed)
        var p3: WLStorage<V3>? = WLStorage(
            key: Self.key, defaultValue: V3(), flushInterval: nil, store: Program(shared), migrations: Self.renamedToo)
        try #require(p1.wrappedValue == V1(theme: "dark", fontSize: 13))
        try #require(p2.wrappedValue == V2(colorScheme: "dark", fontSize: 13))
        try #require(p3?.wrappedValue == V3(colorScheme: "dark", fontSize: 13, lineSpacing: 1))

        // Version 1 sets the size; its write is made, and version 2, which has not heard of it, renames the scheme.
        shared.loseNextAnswer(.afterTheWrite) {
            p2.wrappedValue.colorScheme = "blue"
            p2.flush()
        }
        p1.wrappedValue.fontSize = 20
        p1.flush()
        p1.flush()
        var stored = try Self.object(shared)
        #expect(stored["fontSize"] as? Int == 20, "\(stored)")
        #expect(stored["colorScheme"] as? String == "blue" && stored["theme"] as? String == "blue", "\(stored)")

        // Version 3 adds the spacing; its write is made, and version 1 sets the size again, over it: newer.
        shared.loseNextAnswer(.afterTheWrite) {
            p1.wrappedValue.fontSize = 30
            p1.flush()
        }
        p3?.wrappedValue.lineSpacing = 2
        p3?.flush()
        p3?.flush()
        stored = try Self.object(shared)
        #expect(stored["fontSize"] as? Int == 30, "\(stored)")
        #expect(stored["lineSpacing"] as? Double == 2, "\(stored)")
        #expect(stored["colorScheme"] as? String == "blue", "\(stored)")
        #expect(p3?.hasPendingChanges == false)
        p3 = nil

        // A rollback: version 2 again, in a program started anew, sets the size; its write is made, and version 1,
        // which read it, sets it back to what version 2 found: newer, and kept. Then version 1 changes the old name.
        let p2b = WLStorage(
            key: Self.key, defaultValue: V2(), flushInterval: nil, store: Program(shared), migrations: Self.renamed)
        try #require(p2b.wrappedValue == V2(colorScheme: "blue", fontSize: 30))
        shared.loseNextAnswer(.afterTheWrite) {
            let other = WLStorage(key: Self.key, defaultValue: V1(), flushInterval: nil, store: Program(shared))
            other.wrappedValue.fontSize = 30
            other.wrappedValue.theme = "green"
            other.flush()
        }
        p2b.wrappedValue.fontSize = 40
        p2b.flush()
        p2b.flush()
        stored = try Self.object(shared)
        #expect(stored["fontSize"] as? Int == 30, "version 2's size was made again over a newer one: \(stored)")
        #expect(stored["lineSpacing"] as? Double == 2, "version 3's field was lost: \(stored)")
        #expect(stored["theme"] as? String == "green", "\(stored)")
        for storage in [p1.lastError, p2.lastError, p2b.lastError] { #expect(storage == nil) }

        // Programs started anew, of each version, read every change.
        let v1 = WLStorage(key: Self.key, defaultValue: V1(), flushInterval: nil, store: Program(shared))
        let v2 = WLStorage(
            key: Self.key, defaultValue: V2(), flushInterval: nil, store: Program(shared), migrations: Self.renamed)
        let v3 = WLStorage(
            key: Self.key, defaultValue: V3(), flushInterval: nil, store: Program(shared), migrations: Self.renamedToo)
        #expect(v1.wrappedValue == V1(theme: "green", fontSize: 30))
        #expect(v2.wrappedValue == V2(colorScheme: "green", fontSize: 30))
        #expect(v3.wrappedValue == V3(colorScheme: "green", fontSize: 30, lineSpacing: 2))
    }
}
