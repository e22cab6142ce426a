import Foundation
import Synchronization

/// A thread of its own that waits in `poll` for a socket to be readable and calls a handler each time it is, until
/// cancelled: how the listening connection hears a notification.
///
/// It watches a duplicate of the socket, so libpq closing its descriptor never closes one the thread waits on, and a
/// socket pair that ``cancel()`` writes to (close-on-exec at once, unlike a pipe). The handler must read what arrived
/// (or cancel): `poll` reports a socket readable until it is read.
final class SocketWatch: Sendable {
    private let socket: Int32
    /// The pair's ends: the thread waits on `wake`, ``cancel()`` writes to `waker`.
    private let wake: Int32
    private let waker: Int32
    private let cancelled = Atomic<Bool>(false)

    /// Starts the thread, watching a duplicate of `socket` and calling `readable` with the watch until it is cancelled.
    init(socket: Int32, readable: @escaping @Sendable (SocketWatch) -> Void) throws(PostgresError) {
        let watched = fcntl(socket, F_DUPFD_CLOEXEC, 0)
        guard watched >= 0 else {
            throw PostgresError(.connectionLost, "dup failed: \(String(cString: strerror(errno)))")
        }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            let error = PostgresError(.connectionLost, "socketpair failed: \(String(cString: strerror(errno)))")
            Glibc.close(watched)
            throw error
        }
        self.socket = watched
        self.wake = pair[0]
        self.waker = pair[1]
        let thread = Thread { [self] in run(readable) }
        thread.name = "WLStoragePostgres.listener"
        thread.start()
    }

    /// Ends the watch once a handler call in progress returns, without waiting, so the handler itself may cancel.
    func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(waker, &byte, 1)
    }

    deinit {
        Glibc.close(wake)
        Glibc.close(waker)
    }

    private func run(_ readable: @Sendable (SocketWatch) -> Void) {
        defer { Glibc.close(socket) }
        var descriptors = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while !cancelled.load(ordering: .acquiring) {
            if poll(&descriptors, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if descriptors[1].revents != 0 || cancelled.load(ordering: .acquiring) { return }
            if descriptors[0].revents != 0 { readable(self) }
        }
    }
}
