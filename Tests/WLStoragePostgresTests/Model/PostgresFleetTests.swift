import Foundation
import Testing
import WLStorage
import WLStorageFleet
import WLStorageTestSupport

@testable import WLStoragePostgres

// A fleet of real processes sharing one PostgreSQL table: programs of three versions of a type
// (WLStoragePostgresTestChild's `--fleet` mode; the versions add a field, rename one with `.renamed`, drop one and add
// an enum case), each with its connections and change feed, started, driven, killed with SIGKILL and restarted as any
// version by a run drawn from a seed, while the server restarts (fast, and as after a crash) and ends their connections,
// and the network they reach it through (a TCP proxy) is 10 ms away for spells. The model and its invariants are FleetRun's (Sources/WLStorageFleet/FleetRun.swift):
// every set whose flush returned is, at the end, what the row holds, or was replaced by a set that could have been
// written after it; never by a default or a default-filled value; no version serves its default while a value it can
// map is stored; a flushed change is seen by every running version, under any name.
//
// `WLSTORAGE_SEED` replays a run's operations (not the machine's timing); `WLSTORAGE_OPERATIONS` sets the number of
// operations over all runs (400 by default, one run). A failure names its seed. With
// `WLSTORAGE_FLEET_SUMMARY=1`, each run prints what it did, in numbers (for soaks).

/// A switch that several threads may flip.
private final class Toggle: Sendable {
    private let on = Lock(false)

    /// Flips the switch; returns whether it is on now.
    func flip() -> Bool {
        on.withLock { on in
            on.toggle()
            return on
        }
    }
}

/// A namespace of the shared server, as the run sees it.
private struct SharedTable: FleetSharedStore {
    let cluster: PostgresCluster
    let namespace: String
    /// The TCP proxy the programs reach the server through, whose latency the run turns on and off.
    let proxy: LatencyProxy
    /// Whether the proxy delays what it forwards now.
    let delayed = Toggle()

    func url(applicationName: String) -> String {
        "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres application_name=\(applicationName)"
    }

    func start(name: String, version: FleetVersion, flushInterval: Int?) throws -> FleetProcess {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        return try FleetProcess(
            name: name, executable: directory.appendingPathComponent("WLStoragePostgresTestChild").path,
            arguments: [
                "--fleet", url(applicationName: applicationName(name)), namespace, String(version.rawValue),
                flushInterval.map(String.init) ?? "none",
            ])
    }

    /// Each program's connections carry a name of their own (the namespace's suffix and the program's name).
    func applicationName(_ name: String) -> String {
        "fleet-\(namespace.suffix(12))-\(name)"
    }

    /// The server may still run, and commit, a statement that a killed program sent: its sessions must be gone.
    func awaitGone(name: String) throws {
        let connection = try adminConnection(cluster.url)
        defer { connection.close() }
        let gone = eventually(timeout: 60) {
            (try? sqlValue(
                connection, "SELECT count(*)::text FROM pg_stat_activity WHERE application_name = $1",
                [applicationName(name)])) == "0"
        }
        guard gone else {
            let sessions = try sqlValue(
                connection,
                "SELECT string_agg(pid || ' ' || state || ' ' || query, '; ')::text FROM pg_stat_activity"
                    + " WHERE application_name = $1", [applicationName(name)])
            throw FleetProcess.Failure(description: "the sessions of \(name) outlived it: \(sessions ?? "")")
        }
    }

    /// A restart of the server (`pg_ctl restart -m fast`, or `-m immediate`: a crash and its recovery); every
    /// connection of the fleet's programs ended by the server (`pg_terminate_backend`, as a failover or a proxy does);
    /// or a network 10 ms away each way, from now until the next such disruption.
    func disrupt(kind: Int) throws -> String? {
        switch kind {
        case 0:
            try cluster.restart(mode: .fast)
            return "server restarted (fast)"
        case 1:
            try cluster.restart(mode: .immediate)
            return "server restarted (immediate)"
        case 3:
            let delay = delayed.flip()
            try proxy.delay(milliseconds: delay ? 10 : 0)
            return delay ? "latency of 10 ms" : "latency gone"
        default:
            let connection = try adminConnection(cluster.url)
            defer { connection.close() }
            _ = try sqlValue(
                connection,
                "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity WHERE application_name LIKE $1",
                ["fleet-\(namespace.suffix(12))-%"])
            return "connections ended"
        }
    }

    func stored(key: String) throws -> Data? {
        try WLStoragePostgresStore(url: cluster.url, namespace: namespace).read(key: key)
    }

    func strays(keys: [String]) throws -> [String] {
        try WLStoragePostgresStore(url: cluster.url, namespace: namespace).keys().filter { key in
            !keys.contains(key) && !key.hasSuffix("~before-type-change")
        }
    }
}

@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFleetTests {
    @Test func aFleetOfProcessesSharingATableNeverLosesAFlushedSetToADefault() throws {
        // A server of its own: the run restarts it.
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        for (seed, operations) in FleetRun.plannedRuns(defaultOperations: 400, operationsPerRun: 400) {
            try proxy.delay(milliseconds: 0)
            let run = FleetRun(
                seed: seed, shared: SharedTable(cluster: cluster, namespace: uniqueNamespace(), proxy: proxy))
            do {
                try run.run(operations: operations)
                if ProcessInfo.processInfo.environment["WLSTORAGE_FLEET_SUMMARY"] == "1" { print(run.summary) }
            } catch let problem as FleetProblem {
                Issue.record("\(problem)")
            }
        }
    }
}
