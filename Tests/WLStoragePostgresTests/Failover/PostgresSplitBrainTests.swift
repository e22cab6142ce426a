import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// The old primary started again as a primary after its standby was promoted, rather than as the new primary's standby:
/// an operator's mistake that leaves two servers taking writes (a split brain), which the package cannot undo. What it
/// does then: sessions made before stay where they are, new ones go to the first server of the list that takes writes
/// (the old primary), no program hangs or fails, and a program whose feed moves to the old primary says so.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresSplitBrainTests {
    @Test func aProgramMovedFromThePromotedStandbyToTheOldPrimaryStartedAgainAsAPrimaryReportsIt() throws {
        let pair = try FailoverPair(synchronous: false)
        defer { pair.remove() }
        let (old, new) = (pair.primary, pair.standby)
        let namespace = uniqueNamespace()
        func row(_ cluster: PostgresCluster) throws -> String? {
            let admin = try adminConnection(cluster.url)
            defer { admin.close() }
            return try sqlValue(
                admin, "SELECT convert_from(value, 'UTF8') FROM wlstorage WHERE namespace = $1 AND key = 'x'",
                [namespace])
        }
        func reports(_ program: Replica) -> Int {
            program.printedErrors.components(separatedBy: "storeFailedOver").count - 1
        }
        let writer = try Replica(url: pair.url, namespace: namespace, key: "x")
        let follower = try Replica(url: pair.url, namespace: namespace, key: "x")
        try writer.set(1)
        #expect(follower.waitUntilObserversSee(1))
        try pair.waitUntilTheStandbyCaughtUp()

        try old.stop(mode: .immediate)
        try new.promote()
        try writer.set(2)
        #expect(follower.waitUntilObserversSee(2, timeout: 60), "\(follower.printedErrors)")
        for program in [writer, follower] {
            #expect(eventually(timeout: 30) { reports(program) == 1 }, "\(program.printedErrors)")
        }

        // The old primary starts again as a primary, on the history it had before the failover.
        try old.start()
        // A program started now connects to the first server that takes writes: the old primary.
        let late = try Replica(url: pair.url, namespace: namespace, key: "x")
        // Asked again until it answers 1: a first read that timed out on a loaded machine is read again.
        #expect(
            eventually(timeout: 60, every: .milliseconds(200)) {
                late.send("get")
                return late.lines.contains("value 1")
            }, "\(late.printed)")
        // The programs' sessions made before stay on the promoted standby, and take their writes.
        try writer.set(3)
        #expect(follower.waitUntilObserversSee(3, timeout: 60), "\(follower.printedErrors)")
        try late.set(4)
        late.send("flush")
        #expect(late.waitFor("flushed", timeout: 60))
        // A flush that timed out on a loaded machine leaves the value pending, and it is written later.
        #expect(eventually(timeout: 60) { (try? row(old)) == "4" }, "\(late.printedErrors)")
        #expect(try row(new) == "3")

        // The sessions on the promoted standby end: the programs connect again, to the old primary, whose history
        // lacks what they wrote since the failover. They take its value, and say that the server changed.
        let admin = try adminConnection(new.url)
        _ = try sqlValue(
            admin,
            "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity"
                + " WHERE application_name = 'WLStorage' AND pid <> pg_backend_pid()")
        admin.close()
        for program in [writer, follower] {
            #expect(
                program.waitUntilObserversSee(4, timeout: 60),
                "the program did not take the old primary's value: \(program.printed) \(program.printedErrors)")
            #expect(
                eventually(timeout: 30) { reports(program) == 2 },
                "the move to the old primary's history was not reported: \(program.printedErrors)")
        }
        #expect(reports(late) == 0, "\(late.printedErrors)")
        for program in [writer, follower, late] {
            program.send("exit")
            let end = program.waitForExit(timeout: 60)
            #expect(end?.reason == .exit && end?.status == 0, "\(program.printedErrors)")
        }
        #expect(try row(old) == "4")
        #expect(try row(new) == "3")
    }
}
