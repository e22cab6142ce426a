import Foundation
import Synchronization
import WLStorage

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on a loopback port found free, to a loopback port, that can delay what it forwards, stop forwarding
/// (the connections stay open, silent), refuse new connections and cut the ones it has: the network between a store
/// and its server, as the tests need it to misbehave.
///
/// Threads of its own: one accepts, two pump each connection (one a direction), each waking every 50 ms to see what
/// it is told. ``stop()`` (also at `deinit`) closes everything and waits for the threads to end.
final class TCPProxy: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// What the proxy does with connections.
    enum Mode: Sendable, Equatable {
        /// Forwards both ways, each chunk after the delay.
        case forwarding
        /// Reads nothing and sends nothing, and keeps every connection open: a member, or a network, that stopped
        /// answering without a word. New connections are accepted, and held too.
        case holding
        /// Closes each new connection as soon as it is accepted: a member that is down.
        case refusing
    }

    private struct State {
        var mode = Mode.forwarding
        var delay = Duration.zero
        /// The sockets of every open connection, client side and server side.
        var connections: [ObjectIdentifier: Connection] = [:]
        var stopped = false
        /// Threads running.
        var threads = 0
        /// Chunks read and not yet passed on (waiting out the delay, or being sent).
        var inFlight = 0
    }

    /// One proxied connection: its two sockets, closed by the last of its pumps to end.
    private final class Connection: Sendable {
        let client: Int32
        let server: Int32
        let pumpsLeft = Atomic<Int>(2)

        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }

        /// Ends both directions: each pump sees the end, and the last one closes the sockets.
        func cut() {
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(server, Int32(SHUT_RDWR))
        }
    }

    /// The port the proxy listens on.
    let port: Int
    private let target: Int
    private let listener: Int32
    /// `Lock`, not `Mutex`: ThreadSanitizer does not see `Mutex` on Linux.
    private let state = Lock(State())

    /// Listens on a free loopback port and forwards to `target` on the loopback address.
    init(to target: Int) throws {
        self.target = target
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = Self.loopback(0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        guard bound == 0, named == 0, listen(socket, 128) == 0 else {
            close(socket)
            throw Failure(description: "bind, getsockname or listen: errno \(errno)")
        }
        listener = socket
        port = Int(UInt16(bigEndian: address.sin_port))
        startThread { [self] in accepting() }
    }

    deinit {
        stop()
    }

    /// The URL of the proxy as an etcd endpoint.
    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// What the proxy does from now on. Connections held while ``Mode/holding`` forward what they kept once
    /// ``Mode/forwarding`` again.
    func set(_ mode: Mode) {
        state.withLock { $0.mode = mode }
    }

    /// Delays each chunk forwarded, either way, by `delay`, and the end of a connection too: a chunk read before the
    /// client gave up is still delivered, late, as a slow network delivers it.
    func delay(_ delay: Duration) {
        state.withLock { $0.delay = delay }
    }

    /// Cuts every open connection: each side sees its end.
    func cutAll() {
        let connections = state.withLock { Array($0.connections.values) }
        for connection in connections { connection.cut() }
    }

    /// How many chunks were read, either way, and are not passed on yet: 0 once everything sent to the proxy was
    /// delivered (or dropped with its connection).
    var chunksInFlight: Int { state.withLock { $0.inFlight } }

    /// How many connections are open.
    var openConnections: Int { state.withLock { $0.connections.count } }

    /// Closes every connection and the listening socket, and waits (30 s at most) for the threads to end.
    func stop() {
        let first = state.withLock { state in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard first else { return }
        cutAll()
        var patience = Patience(seconds: 30)
        while state.withLock({ $0.threads }) > 0 && !patience.hasRunOut() { usleep(10_000) }
        close(listener)
    }

    // MARK: - Threads

    private func startThread(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.threads += 1 }
        Thread.detachNewThread { [self] in
            body()
            state.withLock { $0.threads -= 1 }
        }
    }

    private func accepting() {
        while !state.withLock({ $0.stopped }) {
            guard Self.readable(listener) else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            if state.withLock({ $0.mode }) == .refusing {
                close(client)
                continue
            }
            guard let server = connectToTarget() else {
                close(client)
                continue
            }
            let connection = Connection(client: client, server: server)
            let added = state.withLock { state in
                guard !state.stopped else { return false }
                state.connections[ObjectIdentifier(connection)] = connection
                return true
            }
            guard added else {
                close(client)
                close(server)
                continue
            }
            startThread { [self] in pump(from: client, to: server, of: connection) }
            startThread { [self] in pump(from: server, to: client, of: connection) }
        }
    }

    /// Forwards what `source` sends to `destination`, as the mode says, until either ends.
    private func pump(from source: Int32, to destination: Int32, of connection: Connection) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        loop: while true {
            let (mode, delay, stopped) = state.withLock { ($0.mode, $0.delay, $0.stopped) }
            if stopped { break }
            if mode == .holding {
                // Nothing read, nothing sent; the end of the connection is still seen.
                var descriptor = pollfd(fd: source, events: Self.readHangUp, revents: 0)
                if poll(&descriptor, 1, 50) > 0
                    && descriptor.revents & (Self.readHangUp | Int16(POLLERR) | Int16(POLLHUP)) != 0
                {
                    break
                }
                continue
            }
            guard Self.readable(source) else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                // The end travels as slowly as the data: the other side sees it a delay after the last chunk.
                if count == 0 && delay > .zero {
                    let (seconds, attoseconds) = delay.components
                    Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) * 1e-18)
                }
                break
            }
            state.withLock { $0.inFlight += 1 }
            defer { state.withLock { $0.inFlight -= 1 } }
            if delay > .zero {
                let (seconds, attoseconds) = delay.components
                Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) * 1e-18)
            }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes {
                    send(destination, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL))
                }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break loop }
                sent += written
            }
        }
        connection.cut()
        if connection.pumpsLeft.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            state.withLock { _ = $0.connections.removeValue(forKey: ObjectIdentifier(connection)) }
            close(connection.client)
            close(connection.server)
        }
    }

    /// `POLLRDHUP` (Linux): the peer closed its end. Not in Glibc's module.
    private static let readHangUp: Int16 = 0x2000

    /// Whether `socket` has something to read (or its end) within 50 ms.
    private static func readable(_ socket: Int32) -> Bool {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 50) > 0
    }

    private func connectToTarget() -> Int32? {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { return nil }
        var address = Self.loopback(target)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(socket)
            return nil
        }
        return socket
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }
}
