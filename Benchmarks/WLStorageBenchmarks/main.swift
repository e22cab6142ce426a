import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// A replica of the pg-propagation case runs this executable again in a mode of its own, and ends there.
ReplicaMode.runIfAsked()
EtcdReplicaMode.runIfAsked()

/// One benchmark: an identifier for `--filter`, and what it measures.
struct BenchmarkCase {
    var id: String
    var title: String
    var run: (Harness) -> [Row]
}

let cases = [
    BenchmarkCase(id: "get", title: "get an Int, uncontended", run: AccessCases.get),
    BenchmarkCase(id: "set", title: "set an Int, steady state", run: AccessCases.set),
    BenchmarkCase(id: "update", title: "update an Int (+= 1), uncontended", run: AccessCases.update),
    BenchmarkCase(id: "contended", title: "get with two threads contending", run: AccessCases.contendedGet),
    BenchmarkCase(id: "burst", title: "backer writes during a burst of sets", run: DiskCases.writeBurst),
    BenchmarkCase(id: "flush", title: "flush of a 100 B and a 100 KB value", run: DiskCases.flush),
    BenchmarkCase(id: "load", title: "load 1,000 keys at start", run: DiskCases.load),
    BenchmarkCase(id: "filename", title: "file name for an unsafe key", run: AccessCases.fileName),
    BenchmarkCase(
        id: "encrypted-flush", title: "flush of a 100 B value, encrypted against plain", run: EncryptionCases.flush),
    BenchmarkCase(
        id: "encrypted-load", title: "load 1,000 keys, encrypted against plain", run: EncryptionCases.load),
    BenchmarkCase(id: "memory", title: "memory per idle instance", run: MemoryCases.perInstance),
    BenchmarkCase(id: "peers", title: "peers: UserDefaults, encode and write per set", run: PeerCases.peers),
    BenchmarkCase(id: "daemon", title: "CPU time per durable write under a daemon-like load", run: DaemonCases.daemon),
    BenchmarkCase(
        id: "pg-propagation", title: "PostgreSQL: replica-to-replica propagation", run: PostgresCases.propagation),
    BenchmarkCase(
        id: "pg-propagation-no-queue", title: "PostgreSQL: replica-to-replica propagation, onChange(queue: nil)",
        run: PostgresCases.propagationWithoutQueue),
    BenchmarkCase(
        id: "pg-fanout", title: "PostgreSQL: one writer to 3, 10 and 30 replica processes", run: FanOutCases.fanOut),
    BenchmarkCase(id: "pg-flush", title: "PostgreSQL: flush of pending keys in one batch", run: PostgresCases.flush),
    BenchmarkCase(
        id: "pg-batch", title: "PostgreSQL: flush of 1,000 and 10,000 keys against one statement, with round trips",
        run: BatchCases.batch),
    BenchmarkCase(
        id: "batch-core", title: "flush of 10,000 keys of a store in memory, against encoding them",
        run: BatchCoreCases.core),
    BenchmarkCase(
        id: "etcd-propagation", title: "etcd: replica-to-replica propagation", run: EtcdCases.propagation),
    BenchmarkCase(
        id: "etcd-batch", title: "etcd: flush of 1,000 keys against transactions by hand", run: EtcdCases.batch),
    BenchmarkCase(
        id: "pg-access", title: "PostgreSQL: get and set of a PostgreSQL-backed storage", run: PostgresCases.access),
]

let usage = """
    usage: WLStorageBenchmarks [--quick] [--json] [--filter NAME]... [--side library|raw]

      --quick        fewer rounds and shorter runs: a smoke test for CI
      --json         print the results as JSON instead of a table
      --filter NAME  run only the case named NAME, or if no case is, those whose identifier contains NAME
                     (may repeat)
      --side SIDE    daemon case: run only the library's side or only the raw baseline's, with no ratio, so that
                     `strace -c -f -p PID` or `perf record -p PID` sees one of them alone

    cases: \(cases.map(\.id).joined(separator: ", "))
    The pg-* cases start a throwaway PostgreSQL server on 127.0.0.1 with the server programs of `pg_config --bindir`
    or /usr/lib/postgresql/*/bin (WLSTORAGE_POSTGRES_BINDIR=DIR chooses them), and are skipped when there are none.
    The etcd-* cases start a throwaway etcd on 127.0.0.1 with the etcd program on the PATH (WLSTORAGE_ETCD=PATH
    chooses it), and are skipped when there is none.
    Missed targets are marked MISSED. The exit status is 2 when the arguments are wrong, 1 when a target of a
    guarded row (a hot path: get and set, with a file and with a custom backer, and update) is missed outside
    --quick, and 0 otherwise.
    """

var quick = false
var json = false
var filters: [String] = []
var side: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--quick": quick = true
    case "--json": json = true
    case "--filter":
        guard let name = arguments.popFirst() else {
            FileHandle.standardError.write(Data("--filter needs a name\n\(usage)\n".utf8))
            exit(2)
        }
        filters.append(name.lowercased())
    case "--side":
        guard let name = arguments.popFirst(), ["library", "raw"].contains(name) else {
            FileHandle.standardError.write(Data("--side needs library or raw\n\(usage)\n".utf8))
            exit(2)
        }
        side = name
    case "--help", "-h":
        print(usage)
        exit(0)
    default:
        FileHandle.standardError.write(Data("unknown argument \(argument)\n\(usage)\n".utf8))
        exit(2)
    }
}

// A filter that names a case exactly selects that case alone (`load`, not `encrypted-load`); any other, every case
// whose identifier contains it (`pg-`, `etcd`).
let selected = cases.filter { benchmark in
    let id = benchmark.id.lowercased()
    return filters.isEmpty
        || filters.contains { filter in
            cases.contains { $0.id.lowercased() == filter } ? id == filter : id.contains(filter)
        }
}
if selected.isEmpty {
    FileHandle.standardError.write(Data("no case matches \(filters)\n\(usage)\n".utf8))
    exit(2)
}

let signalSources = ExitOnSignals.install()

let harness = Harness(quick: quick, side: side)
var rows: [Row] = []
var skipped: [String] = []
if !HeapUsage.isAvailable { skipped.append("heap measurements: mallinfo2 is not available") }
for benchmark in selected {
    FileHandle.standardError.write(Data("running \(benchmark.id): \(benchmark.title)\n".utf8))
    rows += benchmark.run(harness)
}
BenchmarkCluster.stopShared()
BenchmarkEtcd.stopShared()
skipped += skipLog.withLock { $0 }

let report = Report(
    machine: .current(), mode: quick ? "quick" : "full", date: Date().formatted(.iso8601), rows: rows,
    skipped: skipped)
print(json ? report.json() : report.table())
withExtendedLifetime(signalSources) {}
// `--quick` runs are too short to judge a hot path by a few percent: they report it, and do not fail.
let failed = report.missed.filter(\.guards)
if !quick, !failed.isEmpty {
    FileHandle.standardError.write(
        Data("guarded target(s) missed: \(failed.map { "\($0.title) vs \($0.baseline ?? "target")" })\n".utf8))
    exit(1)
}
