import Dispatch
import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

/// A notification on the store's channel can be sent by any role that can connect to the database: PostgreSQL checks
/// no privilege for `NOTIFY`. A role that may not update the table must not be able to change what a replica holds,
/// nor hide a real write from it: by default, a replica takes the bytes a notification carries only from a server
/// process whose role may update the table, and reads the row for any other (a store that adopts notified values
/// trusts every role that can connect).
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresNotificationTrustTests {
    /// The OID of the default table, which carried changes name (readable by every role, in `pg_class`).
    private static func table(_ admin: PostgresConnection) throws -> String {
        try #require(try sqlValue(admin, "SELECT 'public.wlstorage'::regclass::oid::text"))
    }

    private static func version(_ admin: PostgresConnection, _ namespace: String, _ key: String) throws -> Int64? {
        try sqlValue(admin, "SELECT version::text FROM wlstorage WHERE namespace = $1 AND key = $2", [namespace, key])
            .flatMap { Int64($0) }
    }

    /// A connection as a new role with no privilege on the store's table, or with `privileges` on it.
    private static func unprivilegedConnection(
        _ cluster: PostgresCluster, _ admin: PostgresConnection, granting privileges: String? = nil
    ) throws -> PostgresConnection {
        let role = "no_privilege_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try sqlValue(admin, "CREATE ROLE \(role) LOGIN")
        if let privileges { try sqlValue(admin, "GRANT \(privileges) ON wlstorage TO \(role)") }
        let url = cluster.url.replacingOccurrences(of: "user=postgres", with: "user=\(role)")
        let connection = try adminConnection(url)
        if privileges == nil {
            // The role can neither read nor write the table.
            #expect(throws: (any Error).self) { try sqlValue(connection, "SELECT count(*)::text FROM wlstorage") }
        }
        return connection
    }

    /// The payload a write of `value` (an `Int`'s JSON) at `version` sends.
    private static func carried(
        _ admin: PostgresConnection, _ namespace: String, _ key: String, version: Int64, value: Int
    )
        throws -> String
    {
        WLStoragePostgresStore.payload(namespace: namespace, key: key) + "\(version).\(try table(admin)):"
            + Data("\(value)".utf8).base64EncodedString()
    }

    /// By default a replica takes the bytes a notification of a role that may update the table carries, without reading
    /// the row: it holds 7 while the row still holds 1, which only a replica that did not read shows.
    @Test(arguments: [nil, "SELECT, UPDATE"])
    func aNotificationOfARoleThatMayUpdateTheTableIsTakenWithoutReadingTheRow(privileges: String?) throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let namespace = uniqueNamespace()
        let writer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        try writer.write(key: "k", data: bytes("1"))
        let replica = WLStorage(
            key: "k", defaultValue: 0, flushInterval: 0,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        #expect(replica.wrappedValue == 1)
        // The superuser, or a role granted UPDATE.
        let sender = try privileges.map { try Self.unprivilegedConnection(cluster, admin, granting: $0) } ?? admin
        let version = try #require(try Self.version(admin, namespace, "k"))
        let payload = try Self.carried(admin, namespace, "k", version: version + 1, value: 7)
        #expect(
            try eventuallyThrowing(timeout: 30) {
                try sqlValue(sender, "SELECT pg_notify('wlstorage_changes', $1)", [payload])
                return eventually(timeout: 1) { replica.wrappedValue == 7 }
            })
    }

    /// A role that may read the table but not update it is no more trusted than one without any privilege.
    @Test func aNotificationOfARoleThatMayOnlyReadTheTableMakesTheReplicaReadTheRow() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let namespace = uniqueNamespace()
        let writer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        try writer.write(key: "k", data: bytes("1"))
        let replica = WLStorage(
            key: "k", defaultValue: 0, flushInterval: 0,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        #expect(replica.wrappedValue == 1)
        let reader = try Self.unprivilegedConnection(cluster, admin, granting: "SELECT, INSERT")
        let version = try #require(try Self.version(admin, namespace, "k"))
        let payload = try Self.carried(admin, namespace, "k", version: version + 1, value: 7)
        let adopted = try eventuallyThrowing(timeout: 10) {
            try sqlValue(reader, "SELECT pg_notify('wlstorage_changes', $1)", [payload])
            return eventually(timeout: 0.5) { replica.wrappedValue == 7 }
        }
        #expect(!adopted, "the replica holds 7, which is not in the table")
        try writer.write(key: "k", data: bytes("2"))
        #expect(eventually(timeout: 30) { replica.wrappedValue == 2 })
    }

    @Test
    func aNotificationSentByARoleWithoutPrivilegeDoesNotChangeAReplica() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let namespace = uniqueNamespace()
        let writer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        try writer.write(key: "k", data: bytes("1"))
        let replica = WLStorage(
            key: "k", defaultValue: 0, flushInterval: 0,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        #expect(replica.wrappedValue == 1)
        let forger = try Self.unprivilegedConnection(cluster, admin)
        let table = try Self.table(admin)
        let version = try #require(try Self.version(admin, namespace, "k"))
        // The payload a write of 7 at the next version would send; the row still holds 1.
        let payload =
            WLStoragePostgresStore.payload(namespace: namespace, key: "k") + "\(version + 1).\(table):"
            + Data("7".utf8).base64EncodedString()
        // Sent again until the replica has read the row with its version (its feed's first report), or for 10 s.
        let adopted = try eventuallyThrowing(timeout: 10) {
            try sqlValue(forger, "SELECT pg_notify('wlstorage_changes', $1)", [payload])
            return eventually(timeout: 0.5) { replica.wrappedValue == 7 }
        }
        #expect(!adopted, "the replica holds 7, which is not in the table")
        // A real write of the next version must reach the replica, whatever was forged at that version.
        try writer.write(key: "k", data: bytes("2"))
        #expect(eventually(timeout: 30) { replica.wrappedValue == 2 }, "the real write was taken for a stale one")
    }

    /// Sealed bytes prove who sealed them, not that they are the row's bytes now: a replay of an earlier notification
    /// under a newer version must not roll an encrypted replica back.
    @Test
    func anEarlierNotificationReplayedByARoleWithoutPrivilegeDoesNotRollBackAnEncryptedReplica() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let forger = try Self.unprivilegedConnection(cluster, admin)
        // Listening needs no privilege either.
        try sqlValue(forger, "LISTEN wlstorage_changes")
        let writer = WLStorage(
            key: "s", defaultValue: "", flushInterval: 0,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
                .encrypted(with: key))
        writer.wrappedValue = "old"
        writer.flush()
        var heard: [String] = []
        #expect(
            try eventuallyThrowing {
                heard += try forger.notifications().map(\.payload); return !heard.isEmpty
            })
        let sealedOld = try #require(heard.first.flatMap { $0.split(separator: ":").last.map(String.init) })
        let replica = WLStorage(
            key: "s", defaultValue: "", flushInterval: 0,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
                .encrypted(with: key))
        writer.wrappedValue = "new"
        writer.flush()
        #expect(eventually { replica.wrappedValue == "new" })
        let table = try Self.table(admin)
        let version = try #require(try Self.version(admin, namespace, "s"))
        let replay =
            WLStoragePostgresStore.payload(namespace: namespace, key: "s") + "\(version + 1).\(table):" + sealedOld
        let rolledBack = try eventuallyThrowing(timeout: 10) {
            try sqlValue(forger, "SELECT pg_notify('wlstorage_changes', $1)", [replay])
            return eventually(timeout: 0.5) { replica.wrappedValue == "old" }
        }
        #expect(!rolledBack, "the replica went back to a value the row no longer holds")
    }
}
