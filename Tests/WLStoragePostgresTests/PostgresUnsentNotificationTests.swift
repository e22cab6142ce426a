import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Notifications the store did not send: ignored, and the listener keeps listening.
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresUnsentNotificationTests: PostgresFaultSuite {
    /// A payload announcing a namespace of length `Int.max` makes `colon + 1 + length` overflow: anyone who may
    /// `NOTIFY` on the channel crashes every program listening on it.
    @Test func aPayloadWithAnEnormousLengthIsIgnoredNotACrash() async {
        await #expect(processExitsWith: .success) {
            _ = WLStoragePostgresStore.change(fromPayload: "k:9223372036854775807:x", namespace: "x", table: "1")
            _ = WLStoragePostgresStore.change(fromPayload: "*:9223372036854775806:x", namespace: "x", table: "1")
        }
    }

    @Test func garbageNotificationsAreIgnoredAndTheListenerKeepsListening() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))  // creates the table
        let feed = try FeedRecorder(store)
        feed.clear()
        let admin = try Self.admin(cluster.url)
        for payload in [
            "garbage", "", "k:", "k:abc:", "k:-1:x", "k:99999:\(namespace)", "*:", "k::", "k:3:ab",
            "*:\(namespace.utf8.count + 1):\(namespace)", "k:\(namespace.utf8.count):\(namespace.dropLast())",
        ] {
            let quoted = payload.replacingOccurrences(of: "'", with: "''")
            try Self.sql(admin, "NOTIFY wlstorage_changes, '\(quoted)'")
        }
        try Self.sql(admin, "NOTIFY wlstorage_changes, 'k:\(namespace.utf8.count):\(namespace)by-hand'")
        #expect(feed.waitFor(.key("by-hand")))
        try other.write(key: "after", data: bytes("1"))
        #expect(feed.waitFor(.key("after")))
        #expect(feed.reported == [.key("by-hand"), .key("after")])
    }
}
