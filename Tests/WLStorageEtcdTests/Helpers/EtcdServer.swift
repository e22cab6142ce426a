import Foundation
import Testing
import WLStorage
import WLStorageEtcd

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway single-member etcd for the tests, in a temporary data directory, listening on loopback ports found
/// free.
///
/// The server runs in a process group of its own, under a shell that kills it once the test process is gone (so that a
/// test process that crashes leaves no server behind); ``stop()`` kills the group at once (`SIGKILL`: a crash), and
/// ``start()`` starts it again on the same directory and ports. Every server still running is killed at exit, and its
/// directory removed.
final class EtcdServer: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The `etcd` program: `$WLSTORAGE_ETCD` when set, else the first `etcd` on the `PATH` or in `/usr/bin` and
    /// `/usr/local/bin`.
    static let binary: String? = {
        let environment = ProcessInfo.processInfo.environment
        if let chosen = environment["WLSTORAGE_ETCD"] {
            return FileManager.default.isExecutableFile(atPath: chosen) ? chosen : nil
        }
        let path = (environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin"]
        return path.map { $0 + "/etcd" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Whether the tests that need a server run: `etcd` was found, or `WLSTORAGE_REQUIRE_ETCD=1` demands it (and the
    /// tests then fail without it).
    static let shouldRun = binary != nil || ProcessInfo.processInfo.environment["WLSTORAGE_REQUIRE_ETCD"] == "1"

    /// The reason given when the tests are skipped.
    static let skipReason = Comment(
        rawValue: "the etcd program was not found; install etcd-server (or set WLSTORAGE_ETCD to its path), or set"
            + " WLSTORAGE_REQUIRE_ETCD=1 to fail instead of skipping")

    /// The server shared by the tests that never stop it; each test uses namespaces of its own.
    static func shared() throws -> EtcdServer {
        try sharedServer.get()
    }

    private static let sharedServer = Result { try started() }

    /// A server of its own, started. Ports found free can be taken before the server binds them (by a connection's
    /// local port, say): a server that cannot bind its ports is made again on others, three times at most.
    static func started() throws -> EtcdServer {
        for attempt in 1... {
            let server = try EtcdServer()
            do {
                try server.start()
                return server
            } catch {
                let taken = server.log.contains("address already in use")
                server.remove()
                if !taken || attempt == 3 { throw error }
            }
        }
        fatalError("unreachable")
    }

    let directory: URL
    let clientPort: Int
    let peerPort: Int
    /// A second client port, which no store of a test names: started on it (``start(onAlternatePort:)``), the server is
    /// up while the stores' watches cannot reach it, for as long as the test needs.
    let alternatePort: Int
    /// The client port the server listens on now.
    private let listening = Lock<Int>(0)
    /// The process group of the running server, or `nil` while it is stopped.
    private let group = Lock<pid_t?>(nil)
    private static let live = Lock<[URL: pid_t]>([:])
    private static let exitCleanup: Void = { atexit { EtcdServer.removeAll() } }()

    /// The member's name, unique in its cluster.
    let name: String
    /// The members of the cluster this server is one of, `name=peer URL` separated by commas, and the cluster's token;
    /// `nil` for a cluster of this server alone.
    let cluster = Lock<(members: String, token: String)?>(nil)

    /// Makes a data directory and picks free ports; the server is not started.
    init(name: String = "default") throws {
        self.name = name
        _ = Self.exitCleanup
        var pattern = Array("/tmp/wlsetcd-XXXXXX".utf8CString)
        guard let made = pattern.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "mkdtemp failed")
        }
        directory = URL(fileURLWithPath: String(cString: made), isDirectory: true)
        clientPort = try Self.freePort()
        peerPort = try Self.freePort()
        alternatePort = try Self.freePort()
        Self.live.withLock { $0[directory] = 0 }
    }

    /// Whether the server was started and not stopped since.
    var isRunning: Bool { group.withLock { $0 != nil } }

    /// The client URL.
    var endpoint: String { "http://127.0.0.1:\(clientPort)" }

    /// The same server, written otherwise: a store made with it has another identity, as another program's would be
    /// to this process (two storages of one identity in a process share one value).
    var otherSpelling: String { "http://localhost:\(clientPort)" }

    /// What the server printed, for a failing test.
    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("etcd.log"), encoding: .utf8)) ?? ""
    }

    /// The client URL of the alternate port.
    var alternateEndpoint: String { "http://127.0.0.1:\(alternatePort)" }

    /// The peer URL.
    var peerURL: String { "http://127.0.0.1:\(peerPort)" }

    /// Starts the server, on its client port or on the alternate one, and waits until it answers a read (60 s of
    /// patience).
    func start(onAlternatePort: Bool = false) throws {
        let pid = try launch(onAlternatePort: onAlternatePort)
        try waitUntilAnswering(pid, onAlternatePort: onAlternatePort)
    }

    /// Starts the server, and returns its process group without waiting for it to answer (a member of a cluster
    /// answers reads once a majority of the members run).
    func launch(onAlternatePort: Bool = false) throws -> pid_t {
        guard let binary = Self.binary else { throw Failure(description: "the etcd program was not found") }
        let peer = peerURL
        let client = onAlternatePort ? alternateEndpoint : endpoint
        listening.withLock { $0 = onAlternatePort ? alternatePort : clientPort }
        var arguments = [
            "--name", name, "--data-dir", directory.appendingPathComponent("data").path,
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", cluster.withLock { $0?.members } ?? "\(name)=\(peer)", "--log-outputs", "stderr",
        ]
        if let token = cluster.withLock({ $0?.token }) {
            // A token of the cluster's own: members of another test's cluster are never taken for this one's.
            arguments += ["--initial-cluster-state", "new", "--initial-cluster-token", token]
        }
        // The shell starts etcd, then waits for it or for the test process to end (or to be a zombie that its parent
        // does not reap), whichever comes first.
        let script = """
            "$0" "$@" & server=$!
            while kill -0 \(getpid()) 2>/dev/null && ! grep -q '^State:.*Z' /proc/\(getpid())/status 2>/dev/null \\
                && kill -0 $server 2>/dev/null; do sleep 1; done
            kill -9 $server 2>/dev/null
            """
        let pid = try Self.spawn(
            "/bin/sh", ["-c", script, binary] + arguments, output: directory.appendingPathComponent("etcd.log").path)
        group.withLock { $0 = pid }
        Self.live.withLock { $0[directory] = pid }
        return pid
    }

    /// Waits until the server started as `pid` answers a read (60 s of patience).
    func waitUntilAnswering(_ pid: pid_t, onAlternatePort: Bool = false) throws {
        let client = onAlternatePort ? alternateEndpoint : endpoint
        let probe = try WLStorageEtcdStore(endpoints: [client], namespace: "probe", timeout: .seconds(2))
        var patience = Patience(seconds: 60)
        while true {
            if (try? probe.keys()) != nil { return }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                group.withLock { $0 = nil }
                throw Failure(description: "etcd ended at start (status \(status)):\n\(log.suffix(4000))")
            }
            if patience.hasRunOut() {
                throw Failure(description: "etcd did not answer within 60 s:\n\(log.suffix(4000))")
            }
            usleep(20_000)
        }
    }

    /// Kills the server (`SIGKILL` to its process group) and waits until it is gone.
    func stop() {
        guard let pid = group.withLock({ $0 }) else { return }
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        // The server itself is the shell's child, which no one here waits for: it is gone once its port refuses.
        var patience = Patience(seconds: 30)
        let port = listening.withLock { $0 }
        while Self.accepts(port) && !patience.hasRunOut() { usleep(10_000) }
        group.withLock { $0 = nil }
        Self.live.withLock { $0[directory] = 0 }
    }

    /// Kills the server, if it runs, and removes the directory.
    func remove() {
        stop()
        Self.live.withLock { _ = $0.removeValue(forKey: directory) }
        Self.reserved.withLock { $0.subtract([clientPort, peerPort, alternatePort]) }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Kills every server still running and removes every directory: at exit.
    private static func removeAll() {
        for (directory, pid) in live.withLock({ $0 }) {
            if pid > 0 { kill(-pid, SIGKILL) }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Whether a connection to `port` on the loopback address is accepted.
    private static func accepts(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    /// The ports given to the servers of this process that were not removed: free while a server is stopped, they are
    /// its to start on again, and never given to another.
    private static let reserved = Lock<Set<Int>>([])

    /// A loopback TCP port that no socket is bound to now and no server of this process holds: a random one below the
    /// range the system takes the local ports of connections from (32768 and up by default), or, when none of 100 is
    /// free, one the system picks. It stays reserved until ``remove()``.
    static func freePort() throws -> Int {
        for _ in 0..<100 {
            let port = Int.random(in: 20_000..<32_768)
            guard reserved.withLock({ $0.insert(port).inserted }) else { continue }
            if let socket = try? bound(port) {
                close(socket)
                return port
            }
            reserved.withLock { _ = $0.remove(port) }
        }
        let socket = try bound(0)
        defer { close(socket) }
        var address = loopback(0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        guard named == 0 else { throw Failure(description: "getsockname failed") }
        let port = Int(UInt16(bigEndian: address.sin_port))
        reserved.withLock { _ = $0.insert(port) }
        return port
    }

    /// A socket bound to `port` on the loopback address.
    private static func bound(_ port: Int) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket failed") }
        var address = loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(socket)
            throw Failure(description: "bind failed")
        }
        return socket
    }

    /// Starts `path` in a process group of its own, its output to the file at `output`; returns its process ID.
    private static func spawn(_ path: String, _ arguments: [String], output: String) throws -> pid_t {
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

extension EtcdServer {
    /// Compacts the server's history up to its current revision (`/v3/kv/compaction`, physical), through `endpoint`:
    /// a watch that resumes from an earlier revision is then told it was compacted. Returns the revision.
    @discardableResult
    func compact(through endpoint: String) throws -> Int64 {
        let range = try post(endpoint, "v3/kv/range", ["key": Data("compact".utf8).base64EncodedString()])
        guard let header = range["header"] as? [String: Any], let text = header["revision"] as? String,
            let revision = Int64(text)
        else { throw Failure(description: "no revision in \(range)") }
        _ = try post(endpoint, "v3/kv/compaction", ["revision": String(revision), "physical": true])
        return revision
    }

    /// Posts `body` as JSON to `endpoint`/`path` and returns the answer's JSON object.
    func post(_ endpoint: String, _ path: String, _ body: [String: Any], timeout: Double = 30) throws -> [String: Any] {
        var request = URLRequest(url: URL(string: endpoint + "/" + path)!)
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        request.timeoutInterval = timeout
        let answer = Lock<Result<Data, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, _, error in
            answer.withLock { $0 = error.map { .failure($0) } ?? .success(data ?? Data()) }
            done.signal()
        }.resume()
        guard done.wait(timeout: .now() + timeout * 2) == .success, let result = answer.withLock({ $0 }) else {
            throw Failure(description: "\(path): no answer")
        }
        let data = try result.get()
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw Failure(description: "\(path): \(String(decoding: data, as: UTF8.self))")
        }
        return object
    }
}
