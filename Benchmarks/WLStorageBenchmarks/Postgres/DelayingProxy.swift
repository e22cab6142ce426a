import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A TCP proxy on 127.0.0.1 that forwards each direction of every connection `delay` later than it received it: a
/// network whose round trip is twice the delay, with its bandwidth and ordering intact (what was sent in a burst
/// arrives in a burst). Threads of its own: one accepting, and two per direction of each connection (one reading, one
/// writing each chunk when it is due). It runs until the process ends.
final class DelayingProxy: Sendable {
    let port: Int
    /// The delay each way, in nanoseconds, for what is read from now on.
    let delay = Atomic<UInt64>(0)

    /// Starts a proxy to `targetPort` on 127.0.0.1, forwarding at once until ``delay`` is set.
    init(to targetPort: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw PostgresCases.Failure(description: "socket: errno \(errno)") }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw PostgresCases.Failure(description: "bind or listen: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else {
                    if errno == EINTR { continue }
                    return
                }
                let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var target = Self.loopback(port: targetPort)
                let connected = withUnsafePointer(to: &target) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                guard connected == 0 else {
                    close(client)
                    close(server)
                    continue
                }
                for descriptor in [client, server] {
                    var on: Int32 = 1
                    setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
                }
                Pump.start(from: client, to: server, proxy: self)
                Pump.start(from: server, to: client, proxy: self)
            }
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// One direction of a connection: chunks read, each written once `delay` has passed since it was read.
    private final class Pump: Sendable {
        private let chunks = Mutex<[(due: UInt64, data: [UInt8])]>([])
        private let available = DispatchSemaphore(value: 0)

        static func start(from source: Int32, to destination: Int32, proxy: DelayingProxy) {
            let pump = Pump()
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    let due = monotonicNanoseconds() + proxy.delay.load(ordering: .relaxed)
                    pump.chunks.withLock { $0.append((due, count > 0 ? Array(buffer[..<count]) : [])) }
                    pump.available.signal()
                    if count <= 0 { return }
                }
            }
            Thread.detachNewThread {
                while true {
                    pump.available.wait()
                    guard let chunk = pump.chunks.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
                    sleep(until: chunk.due)
                    guard !chunk.data.isEmpty else {
                        // The other side closed: so does this one.
                        shutdown(destination, Int32(SHUT_WR))
                        return
                    }
                    var offset = 0
                    while offset < chunk.data.count {
                        let written = chunk.data.withUnsafeBytes {
                            write(destination, $0.baseAddress! + offset, $0.count - offset)
                        }
                        if written < 0 && errno == EINTR { continue }
                        guard written > 0 else { return }
                        offset += written
                    }
                }
            }
        }
    }
}
