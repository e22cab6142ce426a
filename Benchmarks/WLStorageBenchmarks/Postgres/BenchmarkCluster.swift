import Dispatch
import Foundation
import Synchronization
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A throwaway PostgreSQL server for the PostgreSQL cases: a new cluster in a temporary directory, listening on
/// 127.0.0.1 at a free port (clients use TCP over the loopback), with `fsync` off.
///
/// It is made when the first PostgreSQL case asks for it (``shared``), and stopped and removed by ``stopShared()`` at
/// the end of the run, or at exit should the run not get there. Run as root, the server's programs run as the
/// `postgres` user (`runuser`), which owns the directory; run as anyone else, they run directly.
final class BenchmarkCluster: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Whether the server runs with `fsync` on, said in the rows' notes.
    static let fsync = false

    /// The folder of `initdb`, `pg_ctl` and `postgres`: `$WLSTORAGE_POSTGRES_BINDIR` when set (and only it), else
    /// `pg_config --bindir`, else the newest `/usr/lib/postgresql/*/bin`.
    static func findBinaries() -> Result<URL, Failure> {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let chosen = environment["WLSTORAGE_POSTGRES_BINDIR"] {
            candidates = [chosen]
        } else {
            if let output = try? run("/bin/sh", ["-c", "pg_config --bindir 2>/dev/null"]) {
                candidates.append(output.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
            candidates += versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin" }
        }
        let found = candidates.first { directory in
            ["initdb", "pg_ctl", "postgres"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: directory + "/" + $0)
            }
        }
        guard let found else {
            return .failure(
                Failure(
                    description: "PostgreSQL's server programs (initdb, pg_ctl, postgres) were not found in "
                        + (candidates.isEmpty
                            ? "pg_config --bindir or /usr/lib/postgresql/*/bin" : candidates.joined(separator: ", "))
                        + "; install postgresql, or set WLSTORAGE_POSTGRES_BINDIR"))
        }
        return .success(URL(fileURLWithPath: found, isDirectory: true))
    }

    /// The server of this run, started on first use; or why there is none.
    static var shared: Result<BenchmarkCluster, Failure> {
        state.withLock { state in
            if let made = state.made { return made }
            let made = Result { () throws(Failure) -> BenchmarkCluster in try BenchmarkCluster() }
            state.made = made
            if case .success(let cluster) = made { state.live = cluster }
            return made
        }
    }

    /// Stops and removes the server of this run, if one was started. The lock is held meanwhile, so that a second
    /// call (the main thread's at the end of the run, the signal handler's) returns only once the server is gone.
    static func stopShared() {
        state.withLock { state in
            state.live?.stopAndRemove()
            state.live = nil
        }
    }

    private struct State {
        var made: Result<BenchmarkCluster, Failure>?
        var live: BenchmarkCluster?
    }

    private static let state = Mutex(State())

    let directory: URL
    let port: Int
    let binaries: URL

    /// `postgresql://postgres@127.0.0.1:PORT/postgres`: TCP over the loopback.
    var url: String { "postgresql://postgres@127.0.0.1:\(port)/postgres" }

    private static let isRoot = geteuid() == 0

    private init() throws(Failure) {
        let binaries = try Self.findBinaries().get()
        if Self.isRoot, getpwnam("postgres") == nil {
            throw Failure(description: "running as root, but there is no postgres user to run the server as")
        }
        var pattern = Array("/tmp/wlstorage-bench-pg-XXXXXX".utf8CString)
        guard let made = pattern.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "mkdtemp failed: errno \(errno)")
        }
        let directory = URL(fileURLWithPath: String(cString: made), isDirectory: true)
        let path = directory.path
        // From here on, the directory (and the server, once started) is removed at exit whatever happens.
        Self.pendingRemoval.withLock { $0 = (path, binaries) }
        _ = Self.exitCleanup
        do throws(Failure) {
            if Self.isRoot { try Self.run("/usr/bin/chown", ["postgres:postgres", directory.path]) }
            try Self.runServerProgram(
                binaries.appendingPathComponent("initdb").path,
                [
                    "-D", directory.appendingPathComponent("data").path, "-A", "trust", "-U", "postgres", "-E",
                    "UTF8", "--no-locale", "--no-sync",
                ])
            // A port free now may be taken before the server binds it: try a few.
            var lastError: Failure?
            var started: Int?
            for _ in 0..<3 {
                let port = try Self.freePort()
                do throws(Failure) {
                    try Self.runServerProgram(
                        binaries.appendingPathComponent("pg_ctl").path,
                        [
                            "-D", directory.appendingPathComponent("data").path, "-o",
                            "-k \(directory.path) -p \(port) -c listen_addresses=127.0.0.1"
                                + " -c fsync=\(Self.fsync ? "on" : "off") -c max_connections=150",
                            "-l", directory.appendingPathComponent("server.log").path, "-w", "-t", "60", "start",
                        ])
                    started = port
                    break
                } catch {
                    lastError = error
                }
            }
            guard let started else { throw lastError ?? Failure(description: "the server did not start") }
            self.port = started
            self.directory = directory
            self.binaries = binaries
        } catch {
            Self.removeDirectory(directory.path, binaries: binaries)
            Self.pendingRemoval.withLock { $0 = nil }
            throw error
        }
    }

    private func stopAndRemove() {
        Self.pendingRemoval.withLock { $0 = nil }
        Self.removeDirectory(directory.path, binaries: binaries)
    }

    /// The directory to stop a server in and remove at exit, when the run ends before ``stopShared()``, and the
    /// server programs to stop it with.
    private static let pendingRemoval = Mutex<(path: String, binaries: URL)?>(nil)
    private static let exitCleanup: Void = {
        atexit {
            let pending = BenchmarkCluster.pendingRemoval.withLock { pending in
                defer { pending = nil }
                return pending
            }
            if let pending { BenchmarkCluster.removeDirectory(pending.path, binaries: pending.binaries) }
        }
    }()

    /// Stops the server in `path`, if it runs (`pg_ctl stop -m immediate`), and removes the directory.
    private static func removeDirectory(_ path: String, binaries: URL) {
        let data = path + "/data"
        if FileManager.default.fileExists(atPath: data + "/postmaster.pid") {
            _ = try? runServerProgram(
                binaries.appendingPathComponent("pg_ctl").path,
                ["-D", data, "-m", "immediate", "-w", "-t", "30", "stop"])
        }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A TCP port of 127.0.0.1 that nothing listens on now: the one the kernel picks for a socket bound to port 0.
    private static func freePort() throws(Failure) -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket failed: errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else { throw Failure(description: "could not find a free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a server program: as the `postgres` user when run as root (the server refuses to run as root).
    private static func runServerProgram(_ path: String, _ arguments: [String]) throws(Failure) {
        if isRoot {
            try run("/usr/sbin/runuser", ["-u", "postgres", "--", path] + arguments)
        } else {
            try run(path, arguments)
        }
    }

    /// Runs a program to its end and returns what it printed; throws with its output when it fails.
    ///
    /// The output goes to a file, not a pipe, which the server that `pg_ctl start` leaves running would keep open.
    @discardableResult
    private static func run(_ path: String, _ arguments: [String]) throws(Failure) -> String {
        var template = Array("/tmp/wlstorage-bench-pg-output-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw Failure(description: "mkstemp failed: errno \(errno)") }
        let output = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer {
            close(descriptor)
            unlink(output)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, descriptor, 1)
        posix_spawn_file_actions_adddup2(&actions, descriptor, 2)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw Failure(description: "\(path) could not be started: \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw Failure(description: "waitpid failed for \(path): errno \(errno)") }
        }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw Failure(
                description: "\(([path] + arguments).joined(separator: " ")) failed (status \(status)): "
                    + text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return text
    }
}

/// The run's handling of SIGINT, SIGTERM and SIGHUP: every storage is flushed, as the package would, then the
/// PostgreSQL and etcd servers are stopped and removed, and the run ends at once (`_exit`), with the status 128 + the
/// signal.
///
/// Not `exit()`: the main thread goes on meanwhile, and may call `exit()` itself; the exit handlers would then flush
/// again, against a server being stopped.
enum ExitOnSignals {
    /// Installs the handling, before the first storage is created; keep the sources returned.
    static func install() -> [any DispatchSourceSignal] {
        WLStorageSystem.flushesOnSignals = false
        // A write to a pipe or socket whose other end has gone (a child or a connection that ended) fails with EPIPE
        // rather than end the run: a smoke run of CI ended so once, with status 141, in the middle of a case.
        signal(SIGPIPE, SIG_IGN)
        return [SIGINT, SIGTERM, SIGHUP].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { @Sendable in
                WLStorageSystem.flushAll()
                BenchmarkCluster.stopShared()
                BenchmarkEtcd.stopShared()
                _exit(128 + number)
            }
            source.resume()
            return source
        }
    }
}
