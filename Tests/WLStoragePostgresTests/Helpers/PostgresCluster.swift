import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL server for the tests, in a temporary directory, reached by a Unix socket only.
///
/// `initdb` runs once per test process (about 1.3 s), into a template; each cluster copies the template, so that a test
/// that stops and restarts its server can have a server of its own at little cost. Run as root, the server's programs
/// run as the `postgres` user (`runuser`), which owns the directory; run as anyone else, they run directly.
///
/// Every cluster is stopped and its directory removed by ``remove()``, and, should a test not get there, at exit.
final class PostgresCluster: Sendable {
    /// How a server is stopped: `pg_ctl stop -m fast` (clients are disconnected cleanly) or `-m immediate` (a crash:
    /// the server processes end at once, and the next start recovers).
    enum StopMode: String, Sendable {
        case fast
        case immediate
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The folder of `initdb` and `pg_ctl`: `$WLSTORAGE_POSTGRES_BINDIR` when set (only it), else `pg_config
    /// --bindir`, else the newest `/usr/lib/postgresql/*/bin`.
    static let binaries: URL? = {
        var candidates: [String] = []
        if let chosen = ProcessInfo.processInfo.environment["WLSTORAGE_POSTGRES_BINDIR"] {
            candidates.append(chosen)
            return candidates.map { URL(fileURLWithPath: $0) }.first { directory in
                ["initdb", "pg_ctl", "postgres"].allSatisfy {
                    FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent($0).path)
                }
            }
        }
        if let bindir = try? run("/bin/sh", ["-c", "pg_config --bindir 2>/dev/null"]) {
            candidates.append(bindir.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin" }
        return candidates.map { URL(fileURLWithPath: $0) }.first { directory in
            ["initdb", "pg_ctl", "postgres"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent($0).path)
            }
        }
    }()

    /// Whether the tests that need a server must run: the server's programs were found, or
    /// `WLSTORAGE_REQUIRE_POSTGRES=1` demands it (and the tests then fail without them).
    static let shouldRun = binaries != nil || ProcessInfo.processInfo.environment["WLSTORAGE_REQUIRE_POSTGRES"] == "1"

    /// The reason given when the tests are skipped.
    static let skipReason = Comment(
        rawValue: "PostgreSQL's server programs (initdb, pg_ctl) were not found; install postgresql, or set"
            + " WLSTORAGE_REQUIRE_POSTGRES=1 to fail instead of skipping")

    /// The server shared by the tests that never stop it. Each test uses namespaces or tables of its own.
    static func shared() throws -> PostgresCluster {
        try sharedCluster.get()
    }

    private static let sharedCluster = Result { () throws -> PostgresCluster in
        let cluster = try PostgresCluster()
        try cluster.start()
        return cluster
    }

    let directory: URL
    let port: Int
    private static let isRoot = geteuid() == 0
    private static let live = Lock<[URL: Int]>([:])
    private static let exitCleanup: Void = { atexit { PostgresCluster.removeAll() } }()

    /// Settings the server starts with (`-c name=value` each), beyond the tests' own.
    let settings: [String]

    /// Makes a cluster (a copy of the template) in a new temporary directory; it is not started. `settings` are
    /// given to the server at every start (`name=value`, quoted as a shell word).
    convenience init(settings: [String] = []) throws {
        try self.init(empty: (), settings: settings)
        let template = try Self.template.get()
        try Self.run("/bin/cp", ["-a", template.appendingPathComponent("data").path, directory.path])
    }

    /// A cluster whose data directory is left to be made (``standby(of:)``).
    private init(empty: Void, settings: [String]) throws {
        _ = Self.exitCleanup
        self.settings = settings
        var pattern = Array("/tmp/wlspg-XXXXXX".utf8CString)
        guard let made = pattern.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "mkdtemp failed")
        }
        directory = URL(fileURLWithPath: String(cString: made), isDirectory: true)
        port = Int.random(in: 20_000..<60_000)
        Self.live.withLock { $0[directory] = port }
        if Self.isRoot { try Self.run("/usr/bin/chown", ["postgres:postgres", directory.path]) }
    }

    /// A streaming standby of `primary` (which runs), made by `pg_basebackup -R`; it is not started. Once started, it
    /// follows the primary until ``promote()``.
    static func standby(of primary: PostgresCluster) throws -> PostgresCluster {
        let standby = try PostgresCluster(empty: (), settings: [])
        try runServerProgram(
            try program("pg_basebackup"),
            [
                "-D", standby.directory.appendingPathComponent("data").path, "-R", "-X", "stream", "-c", "fast",
                "--no-sync", "-h", primary.directory.path, "-p", String(primary.port), "-U", "postgres",
            ])
        return standby
    }

    /// Makes the server, stopped, start next as a standby of `primary` (`standby.signal` and `primary_conninfo`): a
    /// server that failed over coming back. It refuses writes.
    func followOnNextStart(_ primary: PostgresCluster) throws {
        let data = directory.appendingPathComponent("data")
        let conninfo = "primary_conninfo = 'host=\(primary.directory.path) port=\(primary.port) user=postgres'\n"
        let settings = data.appendingPathComponent("postgresql.auto.conf")
        let handle = try FileHandle(forWritingTo: settings)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(conninfo.utf8))
        try handle.close()
        _ = FileManager.default.createFile(atPath: data.appendingPathComponent("standby.signal").path, contents: Data())
        if Self.isRoot {
            try Self.run("/usr/bin/chown", ["postgres:postgres", data.appendingPathComponent("standby.signal").path])
        }
    }

    /// Promotes the standby to a primary (`pg_ctl promote -w`).
    func promote() throws {
        try Self.runServerProgram(
            try Self.program("pg_ctl"),
            ["-D", directory.appendingPathComponent("data").path, "-w", "-t", "60", "promote"])
    }

    /// The data directory made by `initdb` once, copied by every cluster.
    private static let template = Result { () throws -> URL in
        guard let binaries else {
            throw Failure(description: "PostgreSQL's server programs (initdb, pg_ctl) were not found")
        }
        var pattern = Array("/tmp/wlspg-template-XXXXXX".utf8CString)
        guard let made = pattern.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "mkdtemp failed")
        }
        let directory = URL(fileURLWithPath: String(cString: made), isDirectory: true)
        live.withLock { $0[directory] = 0 }
        if isRoot { try run("/usr/bin/chown", ["postgres:postgres", directory.path]) }
        try runServerProgram(
            binaries.appendingPathComponent("initdb").path,
            [
                "-D", directory.appendingPathComponent("data").path, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                "--no-locale", "--no-sync",
            ])
        return directory
    }

    /// A libpq URL of the server's `postgres` database, as the `postgres` user.
    var url: String {
        "postgresql:///postgres?host=\(directory.path)&port=\(port)&user=postgres"
    }

    /// The path of the server's Unix socket.
    var socketPath: String {
        directory.appendingPathComponent(".s.PGSQL.\(port)").path
    }

    /// Starts the server and waits until it accepts connections (`pg_ctl start -w`).
    func start() throws {
        let options =
            "-k \(directory.path) -p \(port) -c listen_addresses='' -c fsync=off -c max_connections=200"
            + settings.map { " -c " + $0 }.joined()
        try Self.runServerProgram(
            try Self.program("pg_ctl"),
            [
                "-D", directory.appendingPathComponent("data").path, "-o", options, "-l",
                directory.appendingPathComponent("server.log").path, "-w", "-t", "60", "start",
            ])
    }

    /// Stops the server (`pg_ctl stop -m fast|immediate`) and waits until it is gone.
    func stop(mode: StopMode = .fast) throws {
        try Self.runServerProgram(
            try Self.program("pg_ctl"),
            ["-D", directory.appendingPathComponent("data").path, "-m", mode.rawValue, "-w", "-t", "60", "stop"])
    }

    /// Stops the server and starts it again.
    func restart(mode: StopMode = .fast) throws {
        try stop(mode: mode)
        try start()
    }

    /// Stops the server, if it runs, and removes the directory.
    func remove() {
        Self.remove(directory)
    }

    /// What the server logged, for a failing test.
    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
    }

    private static func remove(_ directory: URL) {
        guard live.withLock({ $0.removeValue(forKey: directory) }) != nil else { return }
        let data = directory.appendingPathComponent("data")
        if let pgctl = try? program("pg_ctl"),
            FileManager.default.fileExists(atPath: data.appendingPathComponent("postmaster.pid").path)
        {
            _ = try? runServerProgram(pgctl, ["-D", data.path, "-m", "immediate", "-w", "-t", "30", "stop"])
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Stops every cluster still running and removes every directory: at exit.
    private static func removeAll() {
        for directory in live.withLock({ Array($0.keys) }) { remove(directory) }
    }

    private static func program(_ name: String) throws -> String {
        guard let binaries else {
            throw Failure(description: "PostgreSQL's server programs (initdb, pg_ctl) were not found")
        }
        return binaries.appendingPathComponent(name).path
    }

    /// Runs a server program: as the `postgres` user when the tests run as root (the server refuses to run as root).
    private static func runServerProgram(_ path: String, _ arguments: [String]) throws {
        if isRoot {
            try run("/usr/sbin/runuser", ["-u", "postgres", "--", path] + arguments)
        } else {
            try run(path, arguments)
        }
    }

    /// Runs a program to its end (`posix_spawn`, `waitpid`) and returns what it printed; throws with its output when
    /// it fails.
    ///
    /// Not `Process`: its wait for a program that started a daemon (`pg_ctl start`) was seen never to end.
    @discardableResult
    private static func run(_ path: String, _ arguments: [String]) throws -> String {
        // Output goes to a file, not a pipe: a server started by pg_ctl would keep a pipe open.
        let output = "/tmp/wlspg-output-\(UUID().uuidString)"
        defer { unlink(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw Failure(description: "\(path) could not be started: \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw Failure(description: "waitpid failed for \(path)") }
        }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        // Exited normally with status 0: the low 7 bits (the signal) and the exit code are all zero.
        guard status == 0 else {
            throw Failure(description: "\(([path] + arguments).joined(separator: " ")) failed (\(status)): \(text)")
        }
        return text
    }
}
