import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Programs that update one row while the server restarts (a crash, a clean restart) and their sessions are ended: each
/// update that returned with no error is in the row exactly once. Each test has a server of its own.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresServerRestartTests {
    /// Three programs append ids to one list with `update` while the server crashes (`-m immediate`), restarts
    /// cleanly (`-m fast`) and ends their sessions (`pg_terminate_backend`), each fault once every program has had ten
    /// more updates acknowledged. Before updates stayed conditional across a restart, an update that could not reach
    /// the server was made in its program and written later as a plain set, which replaced the row and erased ids that
    /// other programs' updates had stored: missing ids in every run of the four programs and 800 updates.
    @Test func everyUpdateThatReturnedWithoutAnErrorIsInTheRowOnceWhileTheServerRestarts() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        // The programs' connections carry a name of their own, so that only they are ended.
        let application = "wls_restart_\(UInt32.random(in: 0...UInt32.max))"
        let url = cluster.url + "&application_name=\(application)"
        let programs = try (0..<3).map {
            try Replica(arguments: ["--appends", url, namespace, String($0 * 100_000)])
        }
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
        for fault in ["immediate", "fast", "terminate"] {
            try #require(progress(), "the programs stopped making progress: \(programs.map(\.printedErrors))")
            switch fault {
            case "immediate": try cluster.restart(mode: .immediate)
            case "fast": try cluster.restart(mode: .fast)
            default:
                let admin = try adminConnection(cluster.url)
                _ = try sqlValue(
                    admin,
                    "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity WHERE application_name = $1",
                    [application])
                admin.close()
            }
        }
        try #require(progress(), "the programs stopped making progress: \(programs.map(\.printedErrors))")
        for program in programs { program.send("stop") }
        for program in programs {
            #expect(program.waitFor("stopped", timeout: 120))
            #expect(program.waitForExit(timeout: 60) != nil)
        }

        for program in programs {
            #expect(!program.printedErrors.contains("storeFailedOver"), "a restart was reported as a failover")
        }
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let data = try #require(try store.read(key: "list"))
        let list = try JSONDecoder().decode([Int].self, from: data)
        var counts: [Int: Int] = [:]
        for id in list { counts[id, default: 0] += 1 }
        let twice = counts.filter { $0.value > 1 }.keys.sorted()
        #expect(twice.isEmpty, "ids stored more than once: \(twice)")
        for (index, program) in programs.enumerated() {
            let acknowledged = acknowledged(program)
            let missing = acknowledged.filter { counts[$0] == nil }
            let reported = program.lines.filter { $0.hasPrefix("reported ") }.count
            #expect(
                missing.isEmpty,
                """
                program \(index): \(missing.count) of \(acknowledged.count) acknowledged updates are not in the row \
                (\(reported) reported): \(missing.prefix(20))
                """)
        }
    }
}
