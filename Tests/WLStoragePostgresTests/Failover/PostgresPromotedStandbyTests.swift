import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Programs that name a primary and its streaming standby in their connection string, while the primary ends (a crash,
/// or a clean stop for a switchover) and the standby is promoted: what the flush at exit, updates, a program started in
/// between, and the failover's report do. Each test has servers of its own; they run one at a time (each has two
/// servers and several programs).
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason), .serialized)
struct PostgresPromotedStandbyTests {
    /// With synchronous replication, a program with values pending (1,000, written in one batch, or one) is ended by
    /// SIGTERM while the primary is down (crashed, or stopped for a switchover) and its standby not yet promoted: the
    /// flush on the signal tries again until the standby takes writes, and writes every value there. The store's
    /// timeout and the flush's bound are 90 s here, not 10 s: the test promotes the standby after the signal, which a
    /// loaded machine may take longer than 10 s to do, and the outcome must not depend on its speed.
    @Test(arguments: [PostgresCluster.StopMode.immediate, .fast], [1000, 1])
    func theFlushOnSIGTERMWritesEveryPendingValueToThePromotedStandby(
        mode: PostgresCluster.StopMode, values: Int
    ) throws {
        let pair = try FailoverPair(synchronous: true)
        defer { pair.remove() }
        let namespace = uniqueNamespace()
        let child = try Replica(arguments: ["--pending", pair.url, namespace, "1", String(values), "90", "90"])
        try pair.primary.stop(mode: mode)
        child.send("hold")
        #expect(child.waitFor("set"))
        child.signal(SIGTERM)
        try pair.standby.promote()
        let end = child.waitForExit(timeout: 200)
        #expect(end?.reason == .uncaughtSignal && end?.status == SIGTERM, "\(child.printedErrors)")
        let admin = try adminConnection(pair.standby.url)
        defer { admin.close() }
        let stored = try sqlValue(
            admin,
            "SELECT count(*)::text FROM wlstorage WHERE namespace = $1 AND convert_from(value, 'UTF8') = substr(key, 2)",
            [namespace])
        #expect(stored == String(values), "\(child.printedErrors)")
    }

    /// Three programs append ids to one list with `update` while the primary is stopped cleanly (`-m fast`: their
    /// sessions are ended, an update's commit perhaps in flight) and the standby is promoted, a switchover: the programs
    /// go on on the new primary, and every update that returned with no error is in the row exactly once, with
    /// synchronous replication and without (a clean stop sends the standby everything first).
    @Test(arguments: [true, false])
    func updatesStayExactlyOnceThroughASwitchover(synchronous: Bool) throws {
        let pair = try FailoverPair(synchronous: synchronous)
        defer { pair.remove() }
        let namespace = uniqueNamespace()
        let programs = try AppendingPrograms(url: pair.url, namespace: namespace)
        programs.go()
        try #require(programs.progress(), "the programs stopped making progress: \(programs.errors)")
        try pair.primary.stop(mode: .fast)
        try pair.standby.promote()
        try #require(programs.progress(), "the programs did not go on on the new primary: \(programs.errors)")
        programs.stop()
        try programs.expectEveryAcknowledgedUpdateExactlyOnce(url: pair.standby.url, namespace: namespace)
    }

    /// A program started while the primary is down and its standby not yet promoted (no server takes writes) starts
    /// from the default, and once the standby is promoted takes the row's value from it, without writing: the row keeps
    /// its value and its version.
    @Test func aProgramStartedWhileNoServerTakesWritesReadsTheRowFromThePromotedStandbyWithoutWriting() throws {
        let pair = try FailoverPair(synchronous: true)
        defer { pair.remove() }
        let namespace = uniqueNamespace()
        let writer = try Replica(url: pair.url, namespace: namespace, key: "x")
        try writer.set(5)
        writer.send("flush")
        #expect(writer.waitFor("flushed"))
        writer.send("exit")
        #expect(writer.waitForExit() != nil)
        let versionQuery = "SELECT version::text || ':' || convert_from(value, 'UTF8') FROM wlstorage"
        let before = try { () throws -> String? in
            let admin = try adminConnection(pair.primary.url)
            defer { admin.close() }
            return try sqlValue(admin, versionQuery + " WHERE namespace = $1 AND key = 'x'", [namespace])
        }()
        #expect(before?.hasSuffix(":5") == true, "\(before ?? "no row")")

        try pair.primary.stop(mode: .immediate)
        let late = try Replica(url: pair.url, namespace: namespace, key: "x")
        late.send("get")
        #expect(late.waitFor("value 0"), "the program did not start from the default: \(late.printed)")
        try pair.standby.promote()
        #expect(
            late.waitUntilObserversSee(5, timeout: 60),
            "the program did not take the row's value: \(late.printed) \(late.printedErrors)")
        late.send("flush")
        #expect(late.waitFor("flushed", timeout: 60))
        let admin = try adminConnection(pair.standby.url)
        defer { admin.close() }
        #expect(
            try sqlValue(admin, versionQuery + " WHERE namespace = $1 AND key = 'x'", [namespace]) == before,
            "the program wrote the row: \(late.printedErrors)")
        late.send("exit")
        #expect(late.waitForExit() != nil)
        #expect(
            try sqlValue(admin, versionQuery + " WHERE namespace = $1 AND key = 'x'", [namespace]) == before,
            "the program wrote the row at exit: \(late.printedErrors)")
    }

    /// A program started while the primary is down and its standby not yet promoted runs an `update` (adds one) at
    /// once: the update waits for a server that takes writes, and is made on the row of the promoted standby (5 becomes
    /// 6), never on the default the program started from. Should the promotion take longer than an update waits for
    /// its store, the update is not made, and the row keeps its value and version.
    @Test func anUpdateStartedWhileNoServerTakesWritesIsMadeOnTheRowOfThePromotedStandby() throws {
        let pair = try FailoverPair(synchronous: true)
        defer { pair.remove() }
        let namespace = uniqueNamespace()
        let writer = try Replica(url: pair.url, namespace: namespace, key: "x")
        try writer.set(5)
        writer.send("flush")
        #expect(writer.waitFor("flushed"))
        writer.send("exit")
        #expect(writer.waitForExit() != nil)
        let rowQuery =
            "SELECT version::text || ':' || convert_from(value, 'UTF8') FROM wlstorage WHERE namespace = $1 AND key = 'x'"
        let before = try { () throws -> String in
            let admin = try adminConnection(pair.primary.url)
            defer { admin.close() }
            return try sqlValue(admin, rowQuery, [namespace]) ?? "no row"
        }()
        let version = try #require(Int(before.prefix { $0 != ":" }), "\(before)")

        try pair.primary.stop(mode: .immediate)
        let late = try Replica(url: pair.url, namespace: namespace, key: "x")
        late.send("increment 1")
        try pair.standby.promote()
        #expect(late.waitFor("incremented 1", timeout: 60))
        late.send("flush")
        #expect(late.waitFor("flushed", timeout: 60))
        late.send("exit")
        #expect(late.waitForExit() != nil)
        let admin = try adminConnection(pair.standby.url)
        defer { admin.close() }
        let after = try sqlValue(admin, rowQuery, [namespace])
        #expect(
            after == "\(version + 1):6" || after == before,
            "the row went from \(before) to \(after ?? "no row"): \(late.printed) \(late.printedErrors)")
        if after == before {
            #expect(late.printedErrors.contains("update"), "an update not made was not reported: \(late.printedErrors)")
        }
    }

    /// The failover is reported once per failover in each program: not when the primary restarts (a crash, a clean
    /// restart), not again when the promoted standby restarts or the old primary comes back as its standby, and once
    /// more when the old primary is promoted back (a second failover).
    @Test func theFailoverIsReportedOnceForEachPromotionAndNeverForARestart() throws {
        // Asynchronous: each server is promoted in turn, and has no standby of its own while it is the primary.
        let pair = try FailoverPair(synchronous: false)
        defer { pair.remove() }
        let namespace = uniqueNamespace()
        let follower = try Replica(url: pair.url, namespace: namespace, key: "x")
        let setter = try Replica(url: pair.url, namespace: namespace, key: "x")
        var value = 0
        /// Sets a new value in each program in turn, and waits until the other's observers see it: the feeds of both
        /// listen again.
        func changeArrives(_ what: String) throws {
            for (writing, reading) in [(setter, follower), (follower, setter)] {
                value += 1
                try writing.set(value)
                try #require(
                    reading.waitUntilObserversSee(value, timeout: 60),
                    "\(what): \(value) did not arrive: \(reading.printedErrors)")
            }
        }
        func reports(_ program: Replica) -> Int {
            program.printedErrors.components(separatedBy: "storeFailedOver").count - 1
        }
        func expectReports(_ count: Int, _ what: String) {
            for program in [follower, setter] {
                // The feed of a store listens again some time after the store writes; its report comes then.
                _ = eventually(timeout: 30) { reports(program) >= count }
                #expect(reports(program) == count, "\(what): \(program.printedErrors)")
            }
        }

        try changeArrives("at the start")
        try pair.primary.restart(mode: .immediate)
        try changeArrives("after the primary crashed and restarted")
        try pair.primary.restart(mode: .fast)
        try changeArrives("after the primary restarted")
        expectReports(0, "restarts of the primary")

        try pair.waitUntilTheStandbyCaughtUp()
        try pair.primary.stop(mode: .immediate)
        try pair.standby.promote()
        try changeArrives("after the failover")
        expectReports(1, "one failover")

        try pair.standby.restart(mode: .fast)
        try changeArrives("after the promoted standby restarted")
        try pair.primary.followOnNextStart(pair.standby)
        try pair.primary.start()
        let admin = try adminConnection(pair.standby.url)
        let streaming = eventually(timeout: 60) {
            (try? sqlValue(admin, "SELECT count(*)::text FROM pg_stat_replication WHERE state = 'streaming'")) == "1"
        }
        admin.close()
        try #require(streaming, "the old primary does not follow the new one: \(pair.primary.log)")
        try changeArrives("after the old primary came back as a standby")
        expectReports(1, "one failover, then restarts")

        try pair.standby.stop(mode: .fast)
        try pair.primary.promote()
        try changeArrives("after the old primary was promoted back")
        expectReports(2, "two failovers")
    }
}
