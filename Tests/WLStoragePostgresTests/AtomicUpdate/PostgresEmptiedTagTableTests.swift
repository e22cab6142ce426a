import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// A write made whose answer was lost, and `<table>_writes` emptied before its tag is claimed (dropped, and made again
/// by the claim's new connection, or truncated): the claim takes the tag, which says nothing then. The store reports
/// the outcome as unknown (it throws), rather than telling the write not made, which would have the change made again
/// over a newer one, or an update counted twice, without a word.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresEmptiedTagTableTests {
    @Test(
        .enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"),
        arguments: ["DROP TABLE", "TRUNCATE"])
    func aChangeMadeWhoseAnswerWasLostIsNotToldNotMadeOnceTheTagsWereEmptied(_ emptying: String) throws {
        let setup = try Setup()
        defer { setup.remove() }
        let outcome = HeldReference<Result<Bool, any Error>>()
        try setup.loseTheAnswer(emptying: emptying) {
            outcome.hold(
                Result {
                    try setup.store.write(
                        key: "prefs", data: bytes(#"{"theme":"blue"}"#), ifItHolds: bytes(#"{"theme":"dark"}"#))
                })
        }
        let answer = try #require(outcome.current)
        #expect(throws: WLStorageError.self, "a write made was told \(answer)") { try answer.get() }
    }

    @Test(
        .enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"),
        arguments: ["DROP TABLE", "TRUNCATE"])
    func anUpdatesWriteMadeWhoseAnswerWasLostIsNotToldNotMadeOnceTheTagsWereEmptied(_ emptying: String) throws {
        let setup = try Setup()
        defer { setup.remove() }
        guard case .found(_, let version) = try setup.store.readVersioned(key: "prefs") else {
            Issue.record("the row was not read with its version")
            return
        }
        let tag = WLStorageWriteTag.random()
        try setup.loseTheAnswer(emptying: emptying) {
            _ = try? setup.store.write(key: "prefs", data: bytes(#"{"theme":"blue"}"#), ifVersion: version, tag: tag)
        }
        let trace = Result { try setup.store.trace(of: tag, key: "prefs") }
        #expect(throws: WLStorageError.self, "a write made was traced as \(trace)") {
            try trace.get()?.committed(ifVersion: version) ?? true
        }
    }

    /// A table of its own, its row `prefs` dark, and a store that reaches the server through a proxy.
    struct Setup {
        let cluster: PostgresCluster
        let proxy: LatencyProxy
        let admin: PostgresConnection
        let table = "wls_emptied_\(UInt32.random(in: 0...UInt32.max))"
        let namespace = uniqueNamespace()
        let other: WLStoragePostgresStore
        let store: WLStoragePostgresStore

        init() throws {
            cluster = try PostgresCluster.shared()
            proxy = try LatencyProxy(to: cluster.socketPath)
            admin = try adminConnection(cluster.url)
            other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, table: table)
            try other.write(key: "prefs", data: bytes(#"{"theme":"dark"}"#))
            store = try WLStoragePostgresStore(
                url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
                table: table, timeout: .seconds(30))
            try #require(try store.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
        }

        func remove() {
            _ = try? sqlValue(admin, "DROP TABLE IF EXISTS \(table), \(table)_writes")
            admin.close()
        }

        /// Runs `write` (the store's write of blue) on a thread while the row is held; once it waits, holds its answer,
        /// frees the row (the write is made), empties `<table>_writes` with `emptying`, and cuts the connection.
        func loseTheAnswer(emptying: String, _ write: @escaping @Sendable () -> Void) throws {
            let holder = try adminConnection(cluster.url)
            defer { holder.close() }
            _ = try holder.query("BEGIN", deadline: .now + .seconds(10))
            try sqlValue(
                holder, "SELECT key FROM \(table) WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, "prefs"])
            let written = startThread(write)
            let holderPID = try #require(try sqlValue(holder, "SELECT pg_backend_pid()::text"))
            let waiting = "SELECT pid::text FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))"
            #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, waiting, [holderPID]) != nil })
            try proxy.freeze()
            _ = try holder.query("COMMIT", deadline: .now + .seconds(10))
            #expect(try eventuallyThrowing(timeout: 60) { try other.read(key: "prefs") == bytes(#"{"theme":"blue"}"#) })
            try sqlValue(admin, "\(emptying) \(table)_writes")
            try proxy.cut()
            #expect(written.wait(timeout: .now() + 120) == .success)
        }
    }
}
