import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PgAttackTempTests {
    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func claimAnswerLost() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let table = "wls_claimlost_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try adminConnection(cluster.url)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, table: table)
        defer { _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes") }
        try other.write(key: "prefs", data: bytes(#"{"theme":"dark"}"#))
        let store = try WLStoragePostgresStore(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
            table: table, timeout: .seconds(30))
        try #require(try store.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
        let rowHolder = try adminConnection(cluster.url)
        let tagHolder = try adminConnection(cluster.url)
        _ = try rowHolder.query("BEGIN", deadline: .now + .seconds(10))
        try sqlValue(rowHolder, "SELECT key FROM \(table) WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, "prefs"])
        _ = try tagHolder.query("BEGIN", deadline: .now + .seconds(10))
        try sqlValue(tagHolder, "LOCK TABLE \(table)_writes IN SHARE MODE")
        let tagPID = try #require(try sqlValue(tagHolder, "SELECT pg_backend_pid()::text"))
        let outcome = HeldReference<Result<Bool, any Error>>()
        let written = startThread {
            outcome.hold(Result { try store.write(key: "prefs", data: bytes(#"{"theme":"blue"}"#), ifItHolds: bytes(#"{"theme":"dark"}"#)) })
        }
        let blocked = "SELECT count(*)::text FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))"
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, blocked, [tagPID]) == "1" })
        try proxy.cut()
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, blocked, [tagPID]) == "2" })
        try proxy.freeze()
        _ = try tagHolder.query("COMMIT", deadline: .now + .seconds(10))
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, "SELECT count(*)::text FROM \(table)_writes WHERE claimed") == "1" })
        try proxy.cut()
        #expect(written.wait(timeout: .now() + 120) == .success)
        print("OUTCOME", String(describing: outcome.current))
        #expect(try !#require(outcome.current).get())
        _ = try rowHolder.query("COMMIT", deadline: .now + .seconds(10))
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, "SELECT count(*)::text FROM pg_stat_activity WHERE datname IS NOT NULL AND query LIKE '%\(table)_writes%' AND state = 'active' AND pid <> pg_backend_pid()") == "0" })
        #expect(try other.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
        #expect(try sqlValue(admin, "SELECT count(*)::text || ' ' || bool_and(claimed)::text FROM \(table)_writes") == "1 true")
    }

    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func writesTableDroppedBeforeClaim() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let table = "wls_dropclaim_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try adminConnection(cluster.url)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, table: table)
        defer { _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes") }
        try other.write(key: "prefs", data: bytes(#"{"theme":"dark"}"#))
        let store = try WLStoragePostgresStore(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
            table: table, timeout: .seconds(30))
        try #require(try store.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
        let rowHolder = try adminConnection(cluster.url)
        _ = try rowHolder.query("BEGIN", deadline: .now + .seconds(10))
        try sqlValue(rowHolder, "SELECT key FROM \(table) WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, "prefs"])
        let rowPID = try #require(try sqlValue(rowHolder, "SELECT pg_backend_pid()::text"))
        let outcome = HeldReference<Result<Bool, any Error>>()
        let written = startThread {
            outcome.hold(Result { try store.write(key: "prefs", data: bytes(#"{"theme":"blue"}"#), ifItHolds: bytes(#"{"theme":"dark"}"#)) })
        }
        let blocked = "SELECT count(*)::text FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))"
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, blocked, [rowPID]) == "1" })
        try proxy.freeze()
        _ = try rowHolder.query("COMMIT", deadline: .now + .seconds(10))
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, "SELECT count(*)::text FROM \(table)_writes") == "1" })
        try sqlValue(admin, "DROP TABLE \(table)_writes")
        try proxy.cut()
        #expect(written.wait(timeout: .now() + 120) == .success)
        print("OUTCOME", String(describing: outcome.current))
        print("ROW", String(describing: try other.read(key: "prefs").map { String(decoding: $0, as: UTF8.self) }))
    }

    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func crashBetweenWriteAndClaim() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let admin = try adminConnection(cluster.url)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "prefs", data: bytes(#"{"theme":"dark"}"#))
        let store = try WLStoragePostgresStore(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
            timeout: .seconds(30))
        try #require(try store.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
        let rowHolder = try adminConnection(cluster.url)
        _ = try rowHolder.query("BEGIN", deadline: .now + .seconds(10))
        try sqlValue(rowHolder, "SELECT key FROM wlstorage WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, "prefs"])
        let rowPID = try #require(try sqlValue(rowHolder, "SELECT pg_backend_pid()::text"))
        let outcome = HeldReference<Result<Bool, any Error>>()
        let written = startThread {
            outcome.hold(Result { try store.write(key: "prefs", data: bytes(#"{"theme":"blue"}"#), ifItHolds: bytes(#"{"theme":"dark"}"#)) })
        }
        let blocked = "SELECT count(*)::text FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))"
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, blocked, [rowPID]) == "1" })
        try proxy.freeze()
        _ = try rowHolder.query("COMMIT", deadline: .now + .seconds(10))
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, "SELECT count(*)::text FROM wlstorage_writes") == "1" })
        admin.close()
        rowHolder.close()
        try cluster.restart(mode: .immediate)
        try proxy.cut()
        #expect(written.wait(timeout: .now() + 120) == .success)
        print("CRASH OUTCOME", String(describing: outcome.current))
        print("CRASH ROW", String(describing: try other.read(key: "prefs").map { String(decoding: $0, as: UTF8.self) }))
    }

    @Test func longNameAndCollision() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let name = "wls_long_" + String(repeating: "x", count: 30) + String(format: "%09u", UInt32.random(in: 0...999_999_999))
        print("LEN", name.utf8.count)
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: name)
        #expect(try store.write(key: "k", data: bytes("1"), ifItHolds: nil))
        print("RELS", String(describing: try sqlValue(admin, "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE '\(name)%'")))
        _ = try? sqlValue(admin, "DROP TABLE \(name), \(name)_writes")
        let base = "wls_coll_\(UInt32.random(in: 0...UInt32.max))"
        let first = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: base + "_writes")
        #expect(try first.write(key: "k", data: bytes("1"), ifItHolds: nil))
        let second = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: base)
        print("COLLISION", String(describing: Result { try second.write(key: "k", data: bytes("1"), ifItHolds: nil) }))
        _ = try? sqlValue(admin, "DROP TABLE \(base), \(base)_writes, \(base)_writes_writes")
    }
}
