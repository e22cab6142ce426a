import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

/// A primary and its streaming standby, both started, each in a cluster of its own, and the connection string that
/// names both (`host=primary,standby` with `target_session_attrs=read-write`), as a program of a replicated deployment
/// has it.
struct FailoverPair {
    let primary: PostgresCluster
    let standby: PostgresCluster

    /// Starts a primary, with synchronous replication when `synchronous` (`synchronous_standby_names='*'`), and its
    /// standby, and waits until the standby streams (synchronously, when asked).
    init(synchronous: Bool) throws {
        primary = try PostgresCluster(settings: synchronous ? ["synchronous_standby_names='*'"] : [])
        try primary.start()
        standby = try PostgresCluster.standby(of: primary)
        try standby.start()
        let admin = try adminConnection(primary.url)
        defer { admin.close() }
        let condition = synchronous ? "sync_state = 'sync'" : "state = 'streaming'"
        let streaming = eventually(timeout: 60) {
            (try? sqlValue(admin, "SELECT count(*)::text FROM pg_stat_replication WHERE \(condition)")) == "1"
        }
        try #require(streaming, "the standby does not stream: \(standby.log)")
    }

    /// Waits until the standby has replayed everything the primary wrote so far, so that the primary, crashed now, can
    /// come back as its standby (it has no history the standby lacks).
    func waitUntilTheStandbyCaughtUp() throws {
        let admin = try adminConnection(primary.url)
        defer { admin.close() }
        let caughtUp = eventually(timeout: 60) {
            let query = "SELECT count(*)::text FROM pg_stat_replication WHERE replay_lsn = pg_current_wal_lsn()"
            return (try? sqlValue(admin, query)) == "1"
        }
        try #require(caughtUp, "the standby did not catch up: \(standby.log)")
    }

    /// Stops both servers and removes their directories.
    func remove() {
        primary.remove()
        standby.remove()
    }

    /// Both servers, the primary first, in a libpq connection string that asks for the one that takes writes.
    var url: String {
        "host=\(primary.directory.path),\(standby.directory.path) port=\(primary.port),\(standby.port)"
            + " user=postgres dbname=postgres target_session_attrs=read-write"
    }
}

/// Programs that append ids to the list under the key `list` with `update` (the test child's `--appends` mode), the
/// ids of program `n` starting at `n * 100_000`.
struct AppendingPrograms {
    let programs: [Replica]

    init(url: String, namespace: String, count: Int = 3) throws {
        programs = try (0..<count).map {
            try Replica(arguments: ["--appends", url, namespace, String($0 * 100_000)])
        }
    }

    /// The ids whose update `program` saw return with no error.
    static func acknowledged(_ program: Replica) -> [Int] {
        program.lines.compactMap { $0.hasPrefix("appended ") ? Int($0.dropFirst(9)) : nil }
    }

    /// Starts appending.
    func go() {
        for program in programs { program.send("go") }
    }

    /// Waits until every program has had ten more updates acknowledged.
    func progress() -> Bool {
        let counts = programs.map { Self.acknowledged($0).count }
        return zip(programs, counts).allSatisfy { program, count in
            eventually(timeout: 120) { Self.acknowledged(program).count >= count + 10 }
        }
    }

    /// What the programs reported, for a failing test.
    var errors: [String] { programs.map(\.printedErrors) }

    /// Stops the programs and waits until they have ended.
    func stop() {
        for program in programs { program.send("stop") }
        for program in programs {
            #expect(program.waitFor("stopped", timeout: 120))
            #expect(program.waitForExit(timeout: 60) != nil)
        }
    }

    /// Checks that the list in `namespace` at `url` holds every acknowledged id, and every id at most once.
    func expectEveryAcknowledgedUpdateExactlyOnce(url: String, namespace: String) throws {
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let data = try #require(try store.read(key: "list"))
        let list = try JSONDecoder().decode([Int].self, from: data)
        var counts: [Int: Int] = [:]
        for id in list { counts[id, default: 0] += 1 }
        let twice = counts.filter { $0.value > 1 }.keys.sorted()
        #expect(twice.isEmpty, "ids stored more than once: \(twice)")
        for (index, program) in programs.enumerated() {
            let acknowledged = Self.acknowledged(program)
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
