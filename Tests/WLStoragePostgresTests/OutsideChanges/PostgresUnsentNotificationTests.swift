import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Notifications the store did not send: ignored, and the listener keeps listening.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresUnsentNotificationTests: PostgresFaultSuite {
    /// A payload announcing a namespace of length `Int.max` made `colon + 1 + length` overflow: anyone who may
    /// `NOTIFY` on the channel crashed every program listening on it. Parsed in this process, not in an exit test:
    /// Swift Testing's watch of an exit test's process waits for any child of the test process without reaping it, and
    /// a child another test left unreaped (a zombie) then keeps it from ever seeing its own, and the run hangs.
    @Test func aPayloadWithAnEnormousLengthIsIgnoredNotACrash() {
        #expect(
            WLStoragePostgresStore.change(fromPayload: "k:9223372036854775807:x", namespace: "x", table: "1") == nil)
        #expect(
            WLStoragePostgresStore.change(fromPayload: "*:9223372036854775806:x", namespace: "x", table: "1") == nil)
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
