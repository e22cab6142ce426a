import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// The change feed on a real network: a listening connection that a middlebox stops forwarding is found out and made
/// again, and a feed the server refuses says so.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFeedTests {
    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func aListeningConnectionThatStopsForwardingIsFoundOutAndTheChangesMeanwhileAreRead() throws {
        ReportedErrors.install()
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        // A replica behind the proxy, and a writer reaching the server directly: two stores, two cells.
        let replica = try WLStoragePostgresStore(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
            timeout: .seconds(3))
        let writer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let seen = WLStorage(key: "mode", defaultValue: 0, flushInterval: 0, store: replica)
        let set = WLStorage(key: "mode", defaultValue: 0, flushInterval: 0, store: writer)
        set.wrappedValue = 1
        set.flush()
        try #require(eventually(timeout: 30) { seen.wrappedValue == 1 })

        // The flows open now are dropped without a word; their sockets stay open, and new connections work.
        try proxy.freeze()
        set.wrappedValue = 2
        set.flush()
        #expect(eventually(timeout: 60) { seen.wrappedValue == 2 }, "the replica never saw the change")
        #expect(eventually(timeout: 30) { replica.changeFeedError == nil })
        // And it keeps hearing changes on the new connection.
        set.wrappedValue = 3
        set.flush()
        #expect(eventually(timeout: 30) { seen.wrappedValue == 3 })
    }

    @Test func aFeedTheServerRefusesSaysWhyUntilItListens() throws {
        ReportedErrors.install()
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let role = "wls_one_\(UInt32.random(in: 0...UInt32.max))"
        // The table, made by a store of the administrator's; the role may read and write it (a superuser would not
        // be held to a connection limit).
        _ = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace()).read(key: "any")
        try sqlValue(admin, "CREATE ROLE \(role) LOGIN CONNECTION LIMIT 1")
        try sqlValue(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON public.wlstorage TO \(role)")
        defer {
            _ = try? sqlValue(admin, "REVOKE ALL ON public.wlstorage FROM \(role)")
            _ = try? sqlValue(admin, "DROP ROLE \(role)")
        }
        let store = try WLStoragePostgresStore(
            url: cluster.connectionURL(user: role), namespace: uniqueNamespace(), timeout: .seconds(30))
        // The store's own connection takes the role's only one.
        #expect(try store.read(key: "mode") == nil)
        let storage = WLStorage(key: "mode", defaultValue: 0, flushInterval: nil, store: store)
        #expect(storage.wrappedValue == 0)
        #expect(eventually(timeout: 30) { store.changeFeedError != nil }, "the feed's refusal was not told")
        let error = try #require(store.changeFeedError)
        #expect(error.message.contains("change feed"))
        #expect(error.message.contains("cannot listen"))
        #expect(error.message.contains(store.identity))
        // Once the role may connect twice, the feed listens, and says nothing more.
        try sqlValue(admin, "ALTER ROLE \(role) CONNECTION LIMIT 2")
        #expect(eventually(timeout: 30) { store.changeFeedError == nil })
    }
}
