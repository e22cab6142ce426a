import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// The store while its server is down, stopped cleanly or crashed, and back: each test has a server of its own.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresOutageTests {
    @Test func aServerDownAtStartIsAnErrorOfEachCallUntilItStarts() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        let store = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(30))
        let feed = try FeedRecorder(store, waitForListening: false)
        let error = try #require(throws: WLStorageError.self) { try store.read(key: "k") }
        #expect(error.code == .readFailed)
        #expect(throws: WLStorageError.self) { try store.write(key: "k", data: bytes("v")) }

        try cluster.start()
        #expect(try store.read(key: "k") == nil)
        try store.write(key: "k", data: bytes("v"))
        #expect(try store.read(key: "k") == bytes("v"))
        // The listener, retrying with its backoff, listens once the server is up.
        #expect(feed.waitFor(.everything), "\(cluster.log)")
    }

    @Test(arguments: [PostgresCluster.StopMode.fast, .immediate])
    func aServerStoppedMidStreamFailsWritesUntilItIsBackAndTheFeedReportsEverything(
        mode: PostgresCluster.StopMode
    ) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let store = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(30))
        let other = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(30))
        let feed = try FeedRecorder(store)
        try store.write(key: "k", data: bytes("1"))
        try other.write(key: "other", data: bytes("1"))
        #expect(feed.waitFor(.key("other")))

        try cluster.stop(mode: mode)
        feed.clear()
        let error = try #require(throws: WLStorageError.self) { try store.write(key: "k", data: bytes("2")) }
        #expect(error.code == .writeFailed)
        #expect(throws: WLStorageError.self) { try store.read(key: "k") }

        try cluster.start()
        try store.write(key: "k", data: bytes("3"))
        #expect(try other.read(key: "k") == bytes("3"))
        #expect(feed.waitFor(.everything), "the listener did not report everything after reconnecting")
        // It listens again: another store's write is reported by key.
        try other.write(key: "other", data: bytes("2"))
        #expect(feed.waitFor(.key("other")))
    }

    @Test func aWriteConnectionLostWhileIdleIsReplacedWithoutAFailure() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let store = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(30))
        try store.write(key: "k", data: bytes("1"))
        try cluster.restart(mode: .immediate)
        // The connection the store holds is dead; the call finds it so and runs again on a new one.
        try store.write(key: "k", data: bytes("2"))
        #expect(try store.read(key: "k") == bytes("2"))
    }
}
