// The PostgreSQL store, plain and encrypted, against the store contract (StoreContract in the test support), as the
// directory and the test stores are.
import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresStoreContractTests {
    @Test func thePostgresStoreKeepsTheContract() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        // Another program's write: a store of its own, on a connection of its own.
        let elsewhere = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try StoreContract.check(store, other: other) { key, data in try elsewhere.write(key: key, data: data) }
    }

    @Test func anEncryptedPostgresStoreKeepsTheContract() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey(bytes: (0..<32).map { UInt8(255 - $0) })
        func make() throws -> WLStorageEncryptedStore {
            WLStorageEncryptedStore(try WLStoragePostgresStore(url: cluster.url, namespace: namespace), key: key)
        }
        let elsewhere = try make()
        try StoreContract.check(try make(), other: try make()) { key, data in
            try elsewhere.write(key: key, data: data)
        }
    }
}
