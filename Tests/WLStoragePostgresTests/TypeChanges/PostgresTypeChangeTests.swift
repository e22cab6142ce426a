import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// The current version of a type kept in a row.
private struct Visits: Codable, Equatable, Sendable {
    var name: String
    var visits: Int
}

/// The shape an earlier version of the program stored.
private struct VisitsV0: Codable {
    var login: String
}

/// A type whose enum a newer version extended.
private struct Mood: Codable, Equatable, Sendable {
    enum Kind: String, Codable, Sendable { case calm }
    var kind: Kind
}

private let visitsMigrations: [WLStorageMigration<Visits>] = [
    .from(VisitsV0.self) { Visits(name: $0.login, visits: 5) }
]

/// A row in the shape of an earlier version of its type, through a store whose notifications carry the values: read
/// through its migration, its bytes kept under another key until the value is written back in the current shape, and
/// written back only while the row still holds what was read.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresTypeChangeTests {
    private static let kept = "profile~before-type-change"

    private func store(_ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(
            url: try PostgresCluster.shared().url, namespace: namespace, timeout: .seconds(10),
            adoptsNotifiedValues: true)
    }

    /// Another program's store writes the row `profile` in the earlier shape; a storage of it is then opened, through
    /// another store of the same namespace and the migration.
    private func rowInTheEarlierShape() throws -> (other: WLStoragePostgresStore, storage: WLStorage<Visits>) {
        let namespace = uniqueNamespace()
        let other = try store(namespace)
        try other.write(key: "profile", data: bytes(#"{"login":"ada"}"#))
        let storage = WLStorage(
            key: "profile", defaultValue: Visits(name: "new", visits: 0), flushInterval: nil,
            store: try store(namespace), migrations: visitsMigrations)
        return (other, storage)
    }

    @Test func aRowInAnEarlierShapeIsWrittenBackInTheCurrentOneAndItsKeptBytesGo() throws {
        let (other, storage) = try rowInTheEarlierShape()
        #expect(storage.wrappedValue == Visits(name: "ada", visits: 5))
        #expect(storage.hasPendingChanges, "the value read through the migration is to be written back")
        #expect(try other.read(key: Self.kept) == bytes(#"{"login":"ada"}"#))
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let row = try #require(try other.read(key: "profile"))
        #expect(try JSONDecoder().decode(Visits.self, from: row) == Visits(name: "ada", visits: 5))
        #expect(try other.read(key: Self.kept) == nil)
    }

    /// Another program stores a value in the current shape before the storage writes its rewrite: the rewrite gives
    /// way, and the storage ends on that value.
    @Test func aRewriteOfARowInAnEarlierShapeGivesWayToAValueStoredMeanwhile() throws {
        let (other, storage) = try rowInTheEarlierShape()
        #expect(storage.wrappedValue == Visits(name: "ada", visits: 5))
        #expect(storage.hasPendingChanges)
        try other.write(key: "profile", data: bytes(#"{"name":"bob","visits":1}"#))
        storage.flush()
        #expect(try other.read(key: "profile") == bytes(#"{"name":"bob","visits":1}"#))
        #expect(
            try eventuallyThrowing { storage.wrappedValue == Visits(name: "bob", visits: 1) },
            "holds \(storage.wrappedValue)")
        #expect(!storage.hasPendingChanges)
    }

    /// The message says what holds the row once: it read "what <store> holds holds JSON that does not decode".
    @Test func aRowAnotherVersionStoredIsReportedInOneSentence() throws {
        let namespace = uniqueNamespace()
        let other = try store(namespace)
        try other.write(key: "mood", data: bytes(#"{"kind":"elated"}"#))
        let storage = WLStorage(
            key: "mood", defaultValue: Mood(kind: .calm), flushInterval: nil, store: try store(namespace))
        #expect(storage.wrappedValue == Mood(kind: .calm))
        let error = try #require(storage.lastError)
        #expect(error.code == .storedByAnotherVersion)
        #expect(!error.message.contains("holds holds"), "\(error.message)")
        #expect(error.message.hasPrefix("the key's value in \(other.identity) holds JSON"), "\(error.message)")
    }
}
