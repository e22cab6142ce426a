import Foundation
import Testing
import WLStorage
import WLStoragePostgres
import WLStorageTestSupport

/// Typed keys in the PostgreSQL store, named directly and through a scope bound to the store.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresTypedKeyTests {
    private struct Cursor: Codable, Sendable, Equatable {
        var position = 0
        var owner = "none"
    }

    @Test func aTypedKeyRoundTripsAndItsStoragesShareOneValue() throws {
        let store = try WLStoragePostgresStore(url: try PostgresCluster.shared().url, namespace: uniqueNamespace())
        let key = WLStorageKey<Cursor>("cursor", default: Cursor(), flushInterval: nil, store: store)
        do {
            let first = WLStorage(key)
            let second = WLStorage(key)
            #expect(first.wrappedValue == Cursor())
            first.wrappedValue.position = 41
            second.update { $0.position += 1 }
            #expect(first.wrappedValue.position == 42)
            first.wrappedValue.owner = "worker-1"
            #expect(second.wrappedValue == Cursor(position: 42, owner: "worker-1"))
            second.flush()
            #expect(second.lastError == nil)
        }
        let row = try #require(try store.read(key: "cursor"))
        #expect(try JSONDecoder().decode(Cursor.self, from: row) == Cursor(position: 42, owner: "worker-1"))
        #expect(WLStorage(key).wrappedValue == Cursor(position: 42, owner: "worker-1"))
    }

    @Test func aScopeBoundToThePostgresStoreKeepsItsKeysThere() throws {
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: try PostgresCluster.shared().url, namespace: namespace)
        let scope = WLStorageScope("postgres-typed-key-tests." + namespace)
        try scope.bind(to: store)
        let key = WLStorageKey<Int>("limit", default: 5, flushInterval: nil, scope: scope)
        let limit = WLStorage(key)
        #expect(limit.wrappedValue == 5)
        limit.wrappedValue = 8
        limit.flush()
        #expect(try store.read(key: "limit") == bytes("8"))
        // Two declarations of one key with different types: the second is refused, naming both types.
        let asText = WLStorage(WLStorageKey<String>("limit", default: "five", flushInterval: nil, scope: scope))
        #expect(asText.lastError?.code == .typeMismatch)
        #expect(asText.lastError?.message.contains("a storage of Int") == true)
        #expect(asText.lastError?.message.contains("type is String") == true)
    }
}
