import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A throwaway single-member etcd for the etcd cases: a new data directory in `/tmp`, listening on 127.0.0.1 at ports
/// found free, with the settings of a default etcd 3.4 (its log is written with `fsync`).
///
/// It is made when the first etcd case asks for it (``shared``), and killed and removed by ``stopShared()`` at the end
/// of the run. It runs in a process group of its own under a shell that kills it once this process is gone, so that a
/// run that is killed leaves no server behind.
final class BenchmarkEtcd: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The `etcd` program: `$WLSTORAGE_ETCD` when set, else the first `etcd` on the `PATH` or in `/usr/bin` and
    /// `/usr/local/bin`.
    static func findBinary() -> Result<String, Failure> {
        let environment = ProcessInfo.processInfo.environment
        if let chosen = environment["WLSTORAGE_ETCD"] {
            return FileManager.default.isExecutableFile(atPath: chosen)
                ? .success(chosen) : .failure(Failure(description: "WLSTORAGE_ETCD=\(chosen) is not an executable"))
        }
        let path = (environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin"]
        guard let found = path.map({ $0 + "/etcd" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else {
            return .failure(
                Failure(
                    description: "the etcd program was not found on the PATH or in /usr/bin, /usr/local/bin;"
                        + " install etcd-server, or set WLSTORAGE_ETCD to its path"))
        }
        return .success(found)
    }

    /// The server of this run, started on first use; or why there is none.
    static var shared: Result<BenchmarkEtcd, Failure> {
        state.withLock { state in
            if let made = state.made { return made }
            let made = Result { () throws(Failure) -> BenchmarkEtcd in try BenchmarkEtcd() }
            state.made = made
            if case .success(let server) = made { state.live = server }
            return made
        }
    }

    /// Kills and removes the server of this run, if one was started.
    static func stopShared() {
        state.withLock { state in
            state.live?.stopAndRemove()
            state.live = nil
        }
    }

    private struct State {
        var made: Result<BenchmarkEtcd, Failure>?
        var live: BenchmarkEtcd?
    }

    private static let state = Mutex(State())

    let directory: String
    let clientPort: Int
    /// The shell that runs the server, leader of its process group.
    private let group: pid_t

    /// The client URL.
    var endpoint: String { "http://127.0.0.1:\(clientPort)" }

    private init() throws(Failure) {
        let binary = try Self.findBinary().get()
        var pattern = Array("/tmp/wlstorage-bench-etcd-XXXXXX".utf8CString)
        guard let made = pattern.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "mkdtemp failed: errno \(errno)")
        }
        directory = String(cString: made)
        clientPort = try Self.freePort()
        let peerPort = try Self.freePort()
        let client = "http://127.0.0.1:\(clientPort)"
        let peer = "http://127.0.0.1:\(peerPort)"
        let arguments = [
            "--name", "bench", "--data-dir", directory + "/data",
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", "bench=\(peer)", "--log-outputs", "stderr",
        ]
        let script = """
            "$0" "$@" & server=$!
            while kill -0 \(getpid()) 2>/dev/null && kill -0 $server 2>/dev/null; do sleep 1; done
            kill -9 $server 2>/dev/null
            """
        do {
            group = try Self.spawn("/bin/sh", ["-c", script, binary] + arguments, output: directory + "/etcd.log")
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        // Ready once it answers a read (60 s of patience).
        let deadline = monotonicNanoseconds() + 60_000_000_000
        while true {
            if let probe = try? RawEtcdClient(endpoint: client),
                (try? probe.post("v3/kv/range", Data(#"{"key":"cHJvYmU="}"#.utf8))) != nil
            {
                return
            }
            if monotonicNanoseconds() > deadline {
                let log = (try? String(contentsOfFile: directory + "/etcd.log", encoding: .utf8)) ?? ""
                stopAndRemove()
                throw Failure(description: "etcd did not answer within 60 s: \(log.suffix(2000))")
            }
            sleep(nanoseconds: 50_000_000)
        }
    }

    /// Kills the server's process group, waits for the shell, and removes the directory.
    private func stopAndRemove() {
        kill(-group, SIGKILL)
        var status: Int32 = 0
        while waitpid(group, &status, 0) < 0 && errno == EINTR {}
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A loopback TCP port that no socket is bound to now, picked by the system.
    private static func freePort() throws(Failure) -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket failed: errno \(errno)") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
            }
        }
        guard named else { throw Failure(description: "bind or getsockname failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Starts `path` in a process group of its own, its output to the file at `output`; returns its process ID.
    private static func spawn(_ path: String, _ arguments: [String], output: String) throws(Failure) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard result == 0 else { throw Failure(description: "posix_spawn \(path) failed: \(result)") }
        return pid
    }
}
