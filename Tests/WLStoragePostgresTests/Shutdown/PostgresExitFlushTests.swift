import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// What the flush at exit and a batch of a PostgreSQL store keep: every value over a slow network, what was committed
/// when a batch fails, and an end when the server stops answering.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresExitFlushTests {
    /// The rows of `namespace` whose value is the number its key names (`kN` holds `N`).
    private static func rowsHoldingTheirNumber(_ connection: PostgresConnection, _ namespace: String) throws -> Int {
        Int(
            try sqlValue(
                connection,
                "SELECT count(*)::text FROM wlstorage WHERE namespace = $1 AND convert_from(value, 'UTF8') = substr(key, 2)",
                [namespace]) ?? "") ?? -1
    }

    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func aProgramThatExitsWithAThousandValuesPendingOverASlowNetworkWritesEveryOne() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let url = "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres"
        // A store timeout of 5 s: one statement per key, at 10 ms a round trip, would need 10 s.
        let child = try Replica(arguments: ["--pending", url, namespace, "1", "1000", "5", "60"])
        try proxy.delay(milliseconds: 5)
        child.send("go")
        let end = child.waitForExit(timeout: 120)
        #expect(end?.reason == .exit && end?.status == 0, "\(child.printedErrors)")
        let admin = try adminConnection(cluster.url)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == 1000, "\(child.printedErrors)")
    }

    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func theFlushAtExitEndsWithinItsBoundWhenTheServerStopsAnswering() throws {
        // A server of its own: twenty stores hold twenty connections, half of what the test servers allow.
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let url = "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres"
        // Twenty stores whose calls each wait 600 s; the flush at exit is bounded by 2 s.
        let child = try Replica(arguments: ["--pending", url, uniqueNamespace(), "20", "1", "600", "2"])
        try proxy.hold()
        child.send("go")
        #expect(child.waitFor("set"))
        let end = child.waitForExit(timeout: 60)
        #expect(end != nil, "the program was still flushing after 60 s")
        #expect(end?.reason == .exit && end?.status == 0)
        #expect(child.printedErrors.contains("ran out of time"), "\(child.printedErrors)")
    }

    /// The server is stopped as the program exits with values pending (1,000, written in one batch, or one, written on
    /// its own), and started again while the flush at exit runs: the flush tries again until it is back. It gave up at
    /// the first refused connection, about 0.1 s into its budget, with none of the values written.
    @Test(arguments: [PostgresCluster.StopMode.fast, .immediate], [1000, 1])
    func theFlushAtExitWritesEveryValueOnceARestartingServerIsBack(mode: PostgresCluster.StopMode, values: Int) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        // A store timeout of 90 s and the flush at exit bounded by 100 s (not the 10 s and 20 s of the defaults): the
        // test starts the server again after the flush began, which a loaded machine may take longer than 10 s to do
        // (crash recovery included), and the outcome must not depend on its speed.
        let child = try Replica(arguments: ["--pending", cluster.url, namespace, "1", String(values), "90", "100"])
        try cluster.stop(mode: mode)
        child.send("go")
        #expect(child.waitFor("set"))
        try cluster.start()
        let end = child.waitForExit(timeout: 200)
        #expect(end?.reason == .exit && end?.status == 0, "\(child.printedErrors)")
        let admin = try adminConnection(cluster.url)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == values, "\(child.printedErrors)")
    }

    /// A program started while the server is down cannot read its keys, so their changes are not written in a batch:
    /// each storage reads its key first, then writes, on its own. The server comes back while the flush at exit runs:
    /// those reads and writes try again until it is back, as a batch does. They gave up at the first refused
    /// connection, with none of the values written.
    @Test(arguments: [1, 20])
    func theFlushAtExitReadsAndWritesKeysThatCouldNotBeReadOnceTheServerIsBack(values: Int) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        try cluster.stop(mode: .fast)
        // A store timeout of 90 s and the flush at exit bounded by 100 s, as above.
        let child = try Replica(arguments: ["--pending", cluster.url, namespace, "1", String(values), "90", "100"])
        child.send("go")
        #expect(child.waitFor("set"))
        try cluster.start()
        let end = child.waitForExit(timeout: 200)
        #expect(end?.reason == .exit && end?.status == 0, "\(child.printedErrors)")
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == values, "\(child.printedErrors)")
    }

    @Test func aBatchThatFailsPartWayKeepsTheChunksItCommittedAndSaysHowMany() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let feed = try FeedRecorder(try WLStoragePostgresStore(url: url, namespace: namespace))
        // The second chunk holds a key too long for the table's index (its bytes do not compress): it fails.
        var random = SystemRandomNumberGenerator()
        let longKey =
            "long-"
            + (0..<8_000).map { _ in String(UInt8.random(in: 0..<16, using: &random), radix: 16) }
            .joined()
        var batch = (0..<WLStoragePostgresStore.batchRows).map {
            WLStorageStoreWrite(key: "k\($0)", data: bytes("\($0)"))
        }
        batch.append(WLStorageStoreWrite(key: longKey, data: bytes("0")))
        batch.append(WLStorageStoreWrite(key: "after", data: bytes("0")))
        var thrown: WLStorageError?
        do {
            try store.write(batch)
        } catch let error as WLStorageError {
            thrown = error
        }
        let error = try #require(thrown)
        #expect(error.storedWrites == WLStoragePostgresStore.batchRows)
        let admin = try adminConnection(url)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == WLStoragePostgresStore.batchRows)
        #expect(try store.read(key: "after") == nil)
        // Each stored key was announced, as a write of one key is.
        #expect(feed.waitFor(.key("k0")) && feed.waitFor(.key("k\(WLStoragePostgresStore.batchRows - 1)")))
        // What the batch stored counts as its own write: it has the version of one.
        #expect(
            try sqlValue(
                admin, "SELECT version::text FROM wlstorage WHERE namespace = $1 AND key = 'k1'", [namespace]) == "1")
    }
}
