import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// A program with no file descriptor left (`EMFILE` from every socket) when its connections to the server end: its
/// reconnections fail and say so, an update is reported as not made and never made later, sets stay pending and are
/// written once it has descriptors again, and its change feed listens again. The program is a child
/// (`WLStoragePostgresTestChild --no-descriptors`): the limit is the process's.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresNoDescriptorsLeftTests: PostgresFaultSuite {
    @Test func withoutDescriptorsAnUpdateIsNotMadeSetsWaitAndTheFeedListensAgainOnceThereAreSome() throws {
        let cluster = try PostgresCluster.shared()
        let application = "emfile-\(UUID().uuidString.prefix(8))"
        let namespace = uniqueNamespace()
        let program = try Replica(
            arguments: ["--no-descriptors", cluster.url + "&application_name=\(application)", namespace, "k"])
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let admin = try Self.admin(cluster.url)
        defer { admin.close() }
        func sessions() throws -> String? {
            try sqlValue(
                admin, "SELECT count(*)::text FROM pg_stat_activity WHERE application_name = $1", [application])
        }
        // Its writing connection and its listening one.
        try #require(try eventuallyThrowing { try sessions() == "2" }, "\(program.lines)")
        program.send("starve")
        try #require(program.waitFor("starved"))
        #expect(try Self.terminate(admin, application: application, where: "true") == 2)
        try #require(try Self.waitUntilGone(admin, application: application, where: "true"))
        // The feed found its connection gone, and cannot make another.
        let feedReport = { program.lines.first { $0.hasPrefix("reported the change feed") } }
        try #require(eventually(timeout: 60) { feedReport() != nil }, "\(program.lines)")
        let listening = try #require(feedReport())
        #expect(listening.contains("could not connect") && listening.contains("Too many open files"), "\(listening)")

        program.send("go")
        try #require(program.waitFor("freed", timeout: 120), "\(program.lines) \(program.printedErrors)")
        let lines = program.lines
        let update = try #require(lines.first { $0.hasPrefix("reported the update was not made") }, "\(lines)")
        #expect(update.contains("could not connect") && update.contains("Too many open files"), "\(update)")
        #expect(lines.contains("value 3"), "\(lines)")
        // The sets, pending, are written once there are descriptors again.
        try #require(program.waitFor("written", timeout: 60), "\(program.lines)")
        #expect(try other.read(key: "k") == bytes("3"))
        // The feed listens again: another program's change is heard.
        try #require(try eventuallyThrowing { try sessions() == "2" }, "\(program.lines)")
        try other.write(key: "k", data: bytes("50"))
        #expect(program.waitFor("changed 50", timeout: 60), "\(program.lines)")
        // The update was never made.
        program.send("get")
        #expect(program.waitFor("value 50"), "\(program.lines)")
        #expect(try other.read(key: "k") == bytes("50"))
        program.send("exit")
        let end = try #require(program.waitForExit(timeout: 60), "the program did not end")
        #expect(end.reason == .exit && end.status == 0, "\(program.printedErrors)")
    }
}
