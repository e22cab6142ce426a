import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Connections killed from outside are replaced, and what was missed meanwhile is reported.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresKilledConnectionTests: PostgresFaultSuite {
    @Test func aTerminatedWriteConnectionIsReplacedByTheNextCall() throws {
        let cluster = try PostgresCluster.shared()
        let application = "fault-\(UUID().uuidString.prefix(8))"
        let url = cluster.url + "&application_name=\(application)"
        let store = try WLStoragePostgresStore(url: url, namespace: uniqueNamespace(), timeout: .seconds(30))
        try store.write(key: "k", data: bytes("1"))
        let admin = try Self.admin(cluster.url)
        #expect(try Self.terminate(admin, application: application, where: "query NOT LIKE 'LISTEN%'") == 1)
        try #require(try Self.waitUntilGone(admin, application: application, where: "query NOT LIKE 'LISTEN%'"))
        // The connection died while idle: the call finds it so and runs again on a new one.
        try store.write(key: "k", data: bytes("2"))
        #expect(try store.read(key: "k") == bytes("2"))
        // And again, in a batch.
        #expect(try Self.terminate(admin, application: application, where: "query NOT LIKE 'LISTEN%'") == 1)
        try #require(try Self.waitUntilGone(admin, application: application, where: "query NOT LIKE 'LISTEN%'"))
        try store.write([WLStorageStoreWrite(key: "a", data: bytes("a")), .init(key: "b", data: bytes("b"))])
        #expect(try store.keys() == ["a", "b", "k"])
        // And in a batch of several chunks, sent in one pipeline.
        #expect(try Self.terminate(admin, application: application, where: "query NOT LIKE 'LISTEN%'") == 1)
        try #require(try Self.waitUntilGone(admin, application: application, where: "query NOT LIKE 'LISTEN%'"))
        let chunked = (0..<WLStoragePostgresStore.batchRows * 3).map {
            WLStorageStoreWrite(key: "c\($0)", data: bytes("\($0)"))
        }
        try store.write(chunked)
        #expect(try store.keys().count == 3 + chunked.count)
        #expect(try store.read(key: "c\(chunked.count - 1)") == bytes("\(chunked.count - 1)"))
    }

    /// Objects pending while the writing connection died idle (the server restarted, or a pooler or firewall dropped
    /// it): the flush of every storage sends them in its batch on condition, which runs again on a new connection, as a
    /// batch of whole values does, and none stays pending (at exit, it would be lost).
    @Test func aFlushOfEveryStorageWritesObjectsOnConditionAfterTheWritingConnectionDiedWhileIdle() throws {
        struct Prefs: Codable, Sendable, Equatable {
            var theme = "light"
            var fontSize = 13
        }
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let keys = ["a", "b", "c"]
        for key in keys { try other.write(key: key, data: bytes(#"{"fontSize":15,"theme":"dark"}"#)) }
        let storages = keys.map { WLStorage(key: $0, defaultValue: Prefs(), flushInterval: nil, store: store) }
        try #require(storages.allSatisfy { $0.wrappedValue == Prefs(theme: "dark", fontSize: 15) })
        try #require(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for storage in storages { storage.wrappedValue.theme = "blue" }
        let replaced = try #require(store.writerPID.value)
        let admin = try Self.admin(cluster.url)
        defer { admin.close() }
        #expect(try sqlValue(admin, "SELECT pg_terminate_backend($1::int)::text", [String(replaced)]) == "true")
        // Its process gone (it leaves the server's list of processes a moment before it closes its socket).
        #expect(eventually(timeout: 60) { kill(replaced, 0) == -1 && errno == ESRCH })
        ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
        for (key, storage) in zip(keys, storages) {
            #expect(!storage.hasPendingChanges, "\(key): \(String(describing: storage.lastError))")
            #expect(try other.read(key: key) == bytes(#"{"fontSize":15,"theme":"blue"}"#), "\(key)")
        }
    }

    @Test func aTerminatedListeningConnectionReportsEverythingOnceBack() throws {
        let cluster = try PostgresCluster.shared()
        let application = "fault-\(UUID().uuidString.prefix(8))"
        let url = cluster.url + "&application_name=\(application)"
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(30))
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)
        feed.clear()
        let admin = try Self.admin(cluster.url)
        // The listening connection's last statement is its LISTEN, its probe, or the lookup of the table a carried
        // change names.
        #expect(
            try Self.terminate(
                admin, application: application,
                where: "(query LIKE 'LISTEN%' OR query = 'SELECT 1' OR query LIKE 'SELECT to_regclass%')") == 1)
        #expect(feed.waitFor(.everything), "the listener did not report everything after it was terminated")
        try other.write(key: "after", data: bytes("1"))
        #expect(feed.waitFor(.key("after")))
        // The store's own writes are still not reported.
        feed.clear()
        try store.write(key: "own", data: bytes("1"))
        try other.write(key: "marker", data: bytes("1"))
        #expect(feed.waitFor(.key("marker")))
        #expect(!feed.reported.contains(.key("own")))
    }

    /// The feed tells the store's own writes by the server process of its writing connection. A write that the feed
    /// hears only after that connection was replaced comes from a process that is no longer the store's, whose number
    /// the system may have given to another connection since: it is reported, which costs a read of the key, rather
    /// than dropped, which could lose another program's change.
    @Test func aWriteHeardAfterItsConnectionWasReplacedIsReportedRatherThanDropped() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        // The handler holds the listener while it reports "hold": what comes meanwhile waits on its socket.
        let held = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let reported = Lock<[WLStorageStoreChange]>([])
        let observation = store.observeChanges { change in
            reported.withLock { $0.append(change) }
            if change == .key("hold") {
                held.signal()
                gate.wait()
            }
        }
        defer {
            gate.signal()
            observation?.cancel()
        }
        try #require(eventually(timeout: 30) { reported.withLock { $0.contains(.everything) } })
        try other.write(key: "hold", data: bytes("1"))
        try #require(held.wait(timeout: .now() + 60) == .success, "the other store's write was not reported")

        // Written on one connection, which then ends; the next write makes another.
        try store.write(key: "own", data: bytes("1"))
        let replaced = try #require(store.writerPID.value)
        let admin = try Self.admin(cluster.url)
        defer { admin.close() }
        #expect(try sqlValue(admin, "SELECT pg_terminate_backend($1::int)::text", [String(replaced)]) == "true")
        #expect(
            try eventuallyThrowing {
                try sqlValue(
                    admin, "SELECT count(*)::text FROM pg_stat_activity WHERE pid = $1::int", [String(replaced)])
                    == "0"
            })
        try store.write(key: "next", data: bytes("2"))
        #expect(store.writerPID.value != replaced)

        gate.signal()
        try other.write(key: "marker", data: bytes("3"))
        #expect(eventually(timeout: 30) { reported.withLock { $0.contains(.key("marker")) } })
        let changes = reported.withLock { $0 }
        #expect(changes.contains(.key("own")), "\(changes)")
        #expect(!changes.contains(.key("next")), "\(changes)")
    }
}
