import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// The feed tells the store's own writes from others' by the server process of the store's writing connection.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresOwnWriteTests: PostgresFaultSuite {
    /// The first change a listening connection hears makes it look up the table's OID, and the notifications that come
    /// during that lookup are taken with its answer. A store whose writing connection is made in the meantime, and
    /// writes, hears its own write then: it is told as its own, by the process its writing connection has by then.
    @Test func aWriteMadeWhileTheListenerLooksUpTheTableIsNotReportedAsAChange() throws {
        let cluster = try PostgresCluster.shared()
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let schema = "own_\(suffix)"
        let lock = Int.random(in: 1...Int(Int32.max))
        let admin = try Self.admin(cluster.url)
        defer { admin.close() }
        // The lookup (`SELECT to_regclass($1)`) finds this function first on the search path: on a listening
        // connection, it waits for an advisory lock that the test holds. Other connections go through.
        try Self.sql(admin, "CREATE SCHEMA \(schema)")
        try Self.sql(
            admin,
            """
            CREATE FUNCTION \(schema).to_regclass(name text) RETURNS regclass LANGUAGE plpgsql AS $$
            BEGIN
                IF EXISTS (SELECT FROM pg_catalog.pg_listening_channels()) THEN
                    PERFORM pg_catalog.pg_advisory_lock_shared(\(lock));
                    PERFORM pg_catalog.pg_advisory_unlock_shared(\(lock));
                END IF;
                RETURN pg_catalog.to_regclass(name);
            END $$
            """)
        let url = cluster.connectionURL(options: "-c search_path=\(schema),pg_catalog")
        let namespace = uniqueNamespace()
        // The lookup waits with the store's timeout: a long one, for a busy machine.
        let store = try WLStoragePostgresStore(
            url: url, namespace: namespace, table: "held_lookup", timeout: .seconds(60))
        let other = try WLStoragePostgresStore(url: url, namespace: namespace, table: "held_lookup")
        try other.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)
        #expect(store.writerPID.value == nil, "the store connected before its first call")

        try Self.sql(admin, "SELECT pg_advisory_lock(\(lock))")
        var locked = true
        defer { if locked { _ = try? Self.sql(admin, "SELECT pg_advisory_unlock(\(lock))") } }
        // The other store's write is the first change the listener hears: it looks up the table, and waits.
        try other.write(key: "theirs", data: bytes("1"))
        try #require(
            try eventuallyThrowing {
                try sqlValue(
                    admin,
                    "SELECT count(*)::text FROM pg_stat_activity WHERE wait_event = 'advisory' "
                        + "AND query LIKE 'SELECT to_regclass%'") == "1"
            }, "the listener did not look up the table")
        // Meanwhile the store makes its writing connection, and writes.
        try store.write(key: "mine", data: bytes("2"))
        let writer = try #require(store.writerPID.value)
        try Self.sql(admin, "SELECT pg_advisory_unlock(\(lock))")
        locked = false

        try other.write(key: "marker", data: bytes("3"))
        #expect(feed.waitFor(.key("marker")))
        #expect(feed.reported.contains(.key("theirs")))
        #expect(store.writerPID.value == writer, "the writing connection was replaced")
        #expect(!feed.reported.contains(.key("mine")), "\(feed.reported)")
    }
}
