import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// A key removed and written again starts its versions over: a replica that knew a higher version must not take the
/// new writes for stale ones.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresVersionResetTests {
    private static func store(_ url: String, _ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10))
    }

    /// A replica's storage of `k` that has followed five carried writes, so that it knows the row's version.
    private static func followingReplica(_ url: String, _ namespace: String, writer: WLStoragePostgresStore) throws
        -> WLStorage<Int>
    {
        try writer.write(key: "k", data: bytes("0"))
        let replica = WLStorage(key: "k", defaultValue: -1, flushInterval: nil, store: try store(url, namespace))
        for value in 1...5 {
            try writer.write(key: "k", data: bytes("\(value)"))
            #expect(eventually(timeout: 30) { replica.wrappedValue == value })
        }
        return replica
    }

    @Test func aKeyRemovedByTheStoreAndWrittenAgainReachesTheReplica() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        let replica = try Self.followingReplica(cluster.url, namespace, writer: writer)
        try writer.remove(key: "k")
        for value in 11...13 {
            try writer.write(key: "k", data: bytes("\(value)"))
            #expect(eventually(timeout: 30) { replica.wrappedValue == value })
        }
    }

    /// A row deleted without the store (an operator's DELETE, a cleanup job, a restore of an older copy of the table)
    /// resets its versions without a notification: the replica, which knew version 6, must not take the new rows'
    /// versions 1, 2 and 3 for stale ones: versions older than the one it knows make it read the row.
    @Test
    func aRowDeletedWithoutTheStoreAndWrittenAgainReachesTheReplica() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        let replica = try Self.followingReplica(cluster.url, namespace, writer: writer)
        let admin = try adminConnection(cluster.url)
        try sqlValue(admin, "DELETE FROM wlstorage WHERE namespace = $1 AND key = 'k'", [namespace])
        for value in 11...13 {
            try writer.write(key: "k", data: bytes("\(value)"))
            #expect(eventually(timeout: 30) { replica.wrappedValue == value })
        }
    }
}
