import Dispatch
import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// A notification on the store's channel can be sent by any role that can connect to the database: PostgreSQL checks
/// no privilege for `NOTIFY`. A role that may not update the table must not be able to change what a replica holds,
/// nor hide a real write from it: by default, a replica takes the bytes a notification carries only from a server
/// process whose role may update the table, and reads the row for any other (a store that adopts notified values
/// trusts every role that can connect).
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
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

    /// A table of its own for one test, made by a store of it, and its store of `namespace`.
    private static func tableOfItsOwn(_ cluster: PostgresCluster, namespace: String) throws -> (
        name: String, writer: WLStoragePostgresStore
    ) {
        let name = "trust_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let writer = try WLStoragePostgresStore(
            url: cluster.url, namespace: namespace, table: name, timeout: .seconds(10))
        try writer.write(key: "k", data: bytes("1"))
        return (name, writer)
    }

    /// Sends the payload of a write of 7 at the version after the row's, on `table`'s channel through `sender`, again
    /// and again for 10 s or until `replica` holds 7; returns whether it did.
    private static func forgedSevenIsTaken(
        by replica: WLStorage<Int>, from sender: PostgresConnection, _ admin: PostgresConnection, table: String,
        namespace: String
    ) throws -> Bool {
        let oid = try #require(try sqlValue(admin, "SELECT $1::regclass::oid::text", [table]))
        let version = try #require(
            try sqlValue(admin, "SELECT version::text FROM \(table) WHERE namespace = $1 AND key = 'k'", [namespace])
                .flatMap { Int64($0) })
        let payload =
            WLStoragePostgresStore.payload(namespace: namespace, key: "k") + "\(version + 1).\(oid):"
            + Data("7".utf8).base64EncodedString()
        return try eventuallyThrowing(timeout: 10) {
            try sqlValue(sender, "SELECT pg_notify($1, $2)", ["\(table)_changes", payload])
            return eventually(timeout: 0.5) { replica.wrappedValue == 7 }
        }
    }

    /// Row security lets a role that may update the table update only the rows its policy allows: such a role is not
    /// trusted with another namespace's values, since it could not have written them.
    @Test func aNotificationOfARoleThatRowSecurityKeepsFromTheRowMakesTheReplicaReadTheRow() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let namespace = uniqueNamespace()
        let (table, writer) = try Self.tableOfItsOwn(cluster, namespace: namespace)
        let replica = WLStorage(
            key: "k", defaultValue: 0, flushInterval: 0,
            store: try WLStoragePostgresStore(
                url: cluster.url, namespace: namespace, table: table, timeout: .seconds(10)))
        #expect(replica.wrappedValue == 1)
        let role = "own_rows_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try sqlValue(admin, "CREATE ROLE \(role) LOGIN")
        try sqlValue(admin, "GRANT SELECT, INSERT, UPDATE ON \(table) TO \(role)")
        try sqlValue(admin, "ALTER TABLE \(table) ENABLE ROW LEVEL SECURITY")
        try sqlValue(
            admin,
            "CREATE POLICY own_rows ON \(table) TO \(role) USING (namespace = current_user)"
                + " WITH CHECK (namespace = current_user)")
        let sender = try adminConnection(cluster.url.replacingOccurrences(of: "user=postgres", with: "user=\(role)"))
        // The role may update the table, but not the namespace's row.
        #expect(
            try sqlValue(sender, "UPDATE \(table) SET value = '7' WHERE namespace = $1 RETURNING 1", [namespace]) == nil
        )
        let adopted = try Self.forgedSevenIsTaken(
            by: replica, from: sender, admin, table: table, namespace: namespace)
        #expect(!adopted, "the replica holds 7, which the table does not, and the sender could not write")
        try writer.write(key: "k", data: bytes("2"))
        #expect(eventually(timeout: 30) { replica.wrappedValue == 2 })
    }

    /// A role whose privilege to update the table is revoked while its connection stays open is no longer trusted
    /// once the listener's next probe has looked at its process again.
    @Test func aNotificationOfARoleWhosePrivilegeWasRevokedMakesTheReplicaReadTheRow() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let namespace = uniqueNamespace()
        let (table, writer) = try Self.tableOfItsOwn(cluster, namespace: namespace)
        // The replica's connections are told from others' by their application name.
        let application = "replica_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let replica = WLStorage(
            key: "k", defaultValue: 0, flushInterval: 0,
            store: try WLStoragePostgresStore(
                url: cluster.url + "&application_name=\(application)", namespace: namespace, table: table,
                timeout: .seconds(10)))
        #expect(replica.wrappedValue == 1)
        let role = "revoked_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try sqlValue(admin, "CREATE ROLE \(role) LOGIN")
        try sqlValue(admin, "GRANT SELECT, UPDATE ON \(table) TO \(role)")
        let sender = try adminConnection(cluster.url.replacingOccurrences(of: "user=postgres", with: "user=\(role)"))
        // Trusted while it may update the table: its process is known to the listener. What it sent stands for the
        // row's next version, which the next real write makes again (taken for stale); the one after is taken.
        #expect(try Self.forgedSevenIsTaken(by: replica, from: sender, admin, table: table, namespace: namespace))
        try writer.write(key: "k", data: bytes("2"))
        try writer.write(key: "k", data: bytes("3"))
        #expect(eventually(timeout: 30) { replica.wrappedValue == 3 })
        try sqlValue(admin, "REVOKE UPDATE ON \(table) FROM \(role)")
        let revoked = try #require(try sqlValue(admin, "SELECT clock_timestamp()::text"))
        // The listener's probe, which looks at the senders it knows in `pg_stat_activity`, has run since.
        #expect(
            try eventuallyThrowing(timeout: 60) {
                try sqlValue(
                    admin,
                    "SELECT count(*)::text FROM pg_stat_activity WHERE application_name = $1"
                        + " AND query LIKE '%pg_stat_activity%' AND state = 'idle' AND state_change > $2::timestamptz",
                    [application, revoked]) != "0"
            })
        let adopted = try Self.forgedSevenIsTaken(
            by: replica, from: sender, admin, table: table, namespace: namespace)
        #expect(!adopted, "the replica holds 7, which the table does not, and the sender may no longer write")
        try writer.write(key: "k", data: bytes("4"))
        #expect(eventually(timeout: 30) { replica.wrappedValue == 4 })
    }
}
