import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Programs that name a primary and its streaming standby in their connection string (`host=primary,standby` with
/// `target_session_attrs=read-write`), while the primary crashes, the standby is promoted, and the old primary comes
/// back as a standby. Each test has servers of its own.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFailoverTests {
    /// With synchronous replication, three programs append ids with `update` and a fourth follows a key while the
    /// primary crashes and the standby is promoted: the writers go on on the new primary by themselves, every update
    /// that returned with no error is in the row exactly once, the follower's feed moves to the new primary, and the
    /// old primary, back as a standby and first in the list of hosts, is passed over.
    @Test func updatesStayExactlyOnceAndChangesArriveThroughAFailover() throws {
        let primary = try PostgresCluster(settings: ["synchronous_standby_names='*'"])
        defer { primary.remove() }
        try primary.start()
        let standby = try PostgresCluster.standby(of: primary)
        defer { standby.remove() }
        try standby.start()
        let admin = try adminConnection(primary.url)
        let streaming = eventually(timeout: 60) {
            (try? sqlValue(admin, "SELECT count(*)::text FROM pg_stat_replication WHERE sync_state = 'sync'")) == "1"
        }
        admin.close()
        try #require(streaming, "the standby does not stream synchronously: \(standby.log)")

        let url =
            "host=\(primary.directory.path),\(standby.directory.path) port=\(primary.port),\(standby.port)"
            + " user=postgres dbname=postgres target_session_attrs=read-write"
        let namespace = uniqueNamespace()
        let programs = try (0..<3).map {
            try Replica(arguments: ["--appends", url, namespace, String($0 * 100_000)])
        }
        let follower = try Replica(url: url, namespace: namespace, key: "followed")
        let setter = try Replica(url: url, namespace: namespace, key: "followed")
        func acknowledged(_ program: Replica) -> [Int] {
            program.lines.compactMap { $0.hasPrefix("appended ") ? Int($0.dropFirst(9)) : nil }
        }
        /// Waits until every program has had ten more updates acknowledged.
        func progress() -> Bool {
            let counts = programs.map { acknowledged($0).count }
            return zip(programs, counts).allSatisfy { program, count in
                eventually(timeout: 120) { acknowledged(program).count >= count + 10 }
            }
        }
        for program in programs { program.send("go") }
        try setter.set(1)
        #expect(follower.waitUntilObserversSee(1), "before the failover: \(follower.printedErrors)")
        try #require(progress(), "the programs stopped making progress: \(programs.map(\.printedErrors))")

        try primary.stop(mode: .immediate)
        try standby.promote()
        try #require(
            progress(), "the programs did not go on on the new primary: \(programs.map(\.printedErrors))")
        try setter.set(2)
        #expect(
            follower.waitUntilObserversSee(2, timeout: 60),
            "the follower's feed did not move to the new primary: \(follower.printedErrors)")
        #expect(follower.printedErrors.contains("storeFailedOver"), "the failover was not reported")

        try primary.followOnNextStart(standby)
        try primary.start()
        try #require(progress(), "the programs stopped making progress: \(programs.map(\.printedErrors))")
        try setter.set(3)
        #expect(follower.waitUntilObserversSee(3, timeout: 60), "\(follower.printedErrors)")
        let old = try adminConnection(primary.url)
        #expect(try sqlValue(old, "SELECT pg_is_in_recovery()::text") == "true", "the old primary is back as a standby")
        old.close()

        for program in programs { program.send("stop") }
        for program in programs {
            #expect(program.waitFor("stopped", timeout: 120))
            #expect(program.waitForExit(timeout: 60) != nil)
        }
        let store = try WLStoragePostgresStore(url: standby.url, namespace: namespace)
        let data = try #require(try store.read(key: "list"))
        let list = try JSONDecoder().decode([Int].self, from: data)
        var counts: [Int: Int] = [:]
        for id in list { counts[id, default: 0] += 1 }
        let twice = counts.filter { $0.value > 1 }.keys.sorted()
        #expect(twice.isEmpty, "ids stored more than once: \(twice)")
        for (index, program) in programs.enumerated() {
            let acknowledged = acknowledged(program)
            let missing = acknowledged.filter { counts[$0] == nil }
            #expect(
                missing.isEmpty,
                """
                program \(index): \(missing.count) of \(acknowledged.count) acknowledged updates are not in the row: \
                \(missing.prefix(20))
                """)
        }
    }

    /// With asynchronous replication, a value acknowledged by the primary and not yet sent to the standby is lost when
    /// the standby is promoted: the row's version goes back. Every program then converges on what the new primary
    /// holds, and a value written after the failover, whose version number the lost write had already used, reaches
    /// every program.
    @Test func programsConvergeOnTheNewPrimaryAfterAFailoverLostAnAcknowledgedWrite() throws {
        let primary = try PostgresCluster()
        defer { primary.remove() }
        try primary.start()
        let standby = try PostgresCluster.standby(of: primary)
        defer { standby.remove() }
        try standby.start()
        let url =
            "host=\(primary.directory.path),\(standby.directory.path) port=\(primary.port),\(standby.port)"
            + " user=postgres dbname=postgres target_session_attrs=read-write"
        let namespace = uniqueNamespace()
        let writer = try Replica(url: url, namespace: namespace, key: "x")
        let follower = try Replica(url: url, namespace: namespace, key: "x")
        try writer.set(1)
        #expect(follower.waitUntilObserversSee(1))
        let versionQuery = "SELECT version::text FROM wlstorage WHERE namespace = $1 AND key = 'x'"
        let admin = try adminConnection(primary.url)
        let version = try sqlValue(admin, versionQuery, [namespace])
        admin.close()
        let replicated = eventually(timeout: 60) {
            guard let reader = try? adminConnection(standby.url) else { return false }
            defer { reader.close() }
            return (try? sqlValue(reader, versionQuery, [namespace])) == version
        }
        try #require(replicated, "the standby did not receive the first value")

        // The standby stops receiving; the primary acknowledges a value the standby never gets, and crashes.
        try standby.stop(mode: .fast)
        try writer.set(2)
        #expect(follower.waitUntilObserversSee(2))
        try primary.stop(mode: .immediate)
        try standby.start()
        try standby.promote()

        // What the new primary holds, the first value, is every program's again once its feed is back.
        #expect(writer.waitUntilObserversSee(1, timeout: 60), "writer: \(writer.printed) \(writer.printedErrors)")
        #expect(
            follower.waitUntilObserversSee(1, timeout: 60), "follower: \(follower.printed) \(follower.printedErrors)")
        for program in [writer, follower] {
            #expect(program.printedErrors.contains("storeFailedOver"), "the failover was not reported")
        }
        // A value written now has the version the lost write had.
        try writer.set(3)
        #expect(writer.waitUntilObserversSee(3, timeout: 60), "writer: \(writer.printedErrors)")
        #expect(
            follower.waitUntilObserversSee(3, timeout: 60), "follower: \(follower.printed) \(follower.printedErrors)")
    }
}
