import Foundation
import WLStorage

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP relay on 127.0.0.1 in front of an etcd client port that forwards every connection as it is, except, once told
/// to cut one, the next transaction that puts a key: it then drops that request (never forwarded) or its answer (the
/// request is carried out, its answer not passed on), runs a step of the test meanwhile (or, for a late one, before it
/// forwards the request), and closes the client's connection, whose caller is left not knowing what became of its
/// write.
///
/// Each connection has a thread of its own, which ends with the connection.
final class TransactionCuttingRelay: Sendable {
    enum Cut: Sendable {
        /// The request is not forwarded.
        case request
        /// The request is forwarded and carried out; its answer is not passed on.
        case answer
        /// The request is held while the test's step runs, then forwarded and carried out; its answer is not passed
        /// on: a transaction delivered late, after what the step did.
        case late
    }

    /// The port it listens on, on 127.0.0.1.
    let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let plan = Lock<(cut: Cut, meanwhile: @Sendable () -> Void)?>(nil)
    private let cuts = Lock<Int>(0)
    /// Whether it stopped taking connections.
    private let stopped = Lock(false)

    /// Starts a relay to the etcd client port `upstreamPort` on 127.0.0.1.
    init(to upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw EtcdServer.Failure(description: "socket failed") }
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
        guard bound == 0, named == 0, listen(socket, 64) == 0 else {
            close(socket)
            throw EtcdServer.Failure(description: "the relay could not listen")
        }
        listener = socket
        port = Int(UInt16(bigEndian: address.sin_port))
        _ = startThread { [self] in acceptConnections() }
    }

    /// The relay's URL, an endpoint for a store.
    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// Cuts the next transaction that puts a key, as `cut` says, and runs `meanwhile` before it closes the connection.
    func cutNextWrite(_ cut: Cut, meanwhile: @escaping @Sendable () -> Void = {}) {
        plan.withLock { $0 = (cut, meanwhile) }
    }

    /// How many transactions were cut so far.
    var cutCount: Int { cuts.withLock { $0 } }

    /// Stops listening. The connections open go on until one of their ends closes them: cut by the relay, a storage's
    /// watch could fail at the moment its storage cancels it, which `URLSession` on Linux may not survive (`Trying to
    /// access a behaviour for a task that in not in the registry`, seen once while these tests were written; see
    /// swift-corelibs-foundation issue #3296).
    func stop() {
        stopped.withLock { $0 = true }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    // MARK: - Connections

    private func acceptConnections() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            guard !stopped.withLock({ $0 }) else {
                close(client)
                return
            }
            _ = startThread { [self] in relay(client) }
        }
    }

    private func relay(_ client: Int32) {
        defer { close(client) }
        let upstream = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard upstream >= 0 else { return }
        defer { close(upstream) }
        var address = Self.loopback(upstreamPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0, let request = Self.readRequest(client) else { return }
        let isWrite =
            request.starts(with: Data("POST /v3/kv/txn ".utf8))
            && request.range(of: Data("\"request_put\"".utf8)) != nil
        let planned =
            isWrite
            ? plan.withLock { plan in
                defer { plan = nil }
                return plan
            } : nil
        if let planned {
            if planned.cut == .late { planned.meanwhile() }
            if planned.cut != .request {
                guard Self.sendAll(request, to: upstream) else { return }
                // The first bytes of the answer: etcd has carried the transaction out.
                var byte: UInt8 = 0
                _ = recv(upstream, &byte, 1, 0)
            }
            cuts.withLock { $0 += 1 }
            if planned.cut != .late { planned.meanwhile() }
            return
        }
        guard Self.sendAll(request, to: upstream) else { return }
        Self.pump(client, upstream)
    }

    /// The first request of a connection, its headers and as many bytes of body as its `Content-Length` says; `nil`
    /// when the connection ends first.
    private static func readRequest(_ socket: Int32) -> Data? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let separator = Data("\r\n\r\n".utf8)
        while true {
            if let end = data.range(of: separator) {
                let headers = String(decoding: data[..<end.lowerBound], as: UTF8.self).lowercased()
                let length =
                    headers.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if data.count - end.upperBound >= length { return data }
            }
            let count = recv(socket, &buffer, buffer.count, 0)
            if count <= 0 { return nil }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    private static func sendAll(_ data: Data, to socket: Int32) -> Bool {
        data.withUnsafeBytes { bytes in
            var sent = 0
            while sent < bytes.count {
                let count = send(socket, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                if count <= 0 { return false }
                sent += count
            }
            return true
        }
    }

    /// Forwards the bytes of each socket to the other until one ends.
    private static func pump(_ first: Int32, _ second: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var polled = [
            pollfd(fd: first, events: Int16(POLLIN), revents: 0), pollfd(fd: second, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&polled, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            for index in 0..<2 where polled[index].revents != 0 {
                let count = recv(polled[index].fd, &buffer, buffer.count, 0)
                if count <= 0 { return }
                guard sendAll(Data(buffer[0..<count]), to: polled[1 - index].fd) else { return }
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
}
