import CWLStorageLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A libpq connection used by hand, in blocking mode: the baselines of the PostgreSQL cases.
///
/// Used from one thread at a time.
final class RawPostgresConnection: @unchecked Sendable {  // used by one thread at a time
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// A statement parameter, sent in binary form: text (OID 25) or bytea (OID 17), as the store sends them.
    enum Parameter {
        case text(String)
        case bytes(Data)
    }

    private let connection: OpaquePointer

    /// Connects with `PQconnectdb`.
    init(url: String) throws(Failure) {
        guard let connection = PQconnectdb(url) else { throw Failure(description: "PQconnectdb returned nothing") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection))
            PQfinish(connection)
            throw Failure(description: "could not connect: \(message)")
        }
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        self.connection = connection
    }

    deinit {
        PQfinish(connection)
    }

    /// The connection's socket (`PQsocket`).
    var socket: Int32 { PQsocket(connection) }

    /// Runs one statement with `PQexecParams` (binary parameters and results) and waits for its result.
    func execute(_ sql: String, _ parameters: [Parameter] = []) throws(Failure) {
        let buffers: [Data] = parameters.map {
            switch $0 {
            case .text(let text): Data(text.utf8)
            case .bytes(let data): data
            }
        }
        let types: [Oid] = parameters.map {
            switch $0 {
            case .text: 25
            case .bytes: 17
            }
        }
        let lengths = buffers.map { Int32($0.count) }
        let formats = [Int32](repeating: 1, count: buffers.count)
        // One buffer holds every parameter's bytes, so that their pointers stay valid during the call.
        let joined = buffers.reduce(into: Data()) { $0.append($1) }
        let result = joined.withUnsafeBytes { bytes -> OpaquePointer? in
            var pointers: [UnsafePointer<CChar>?] = []
            var offset = 0
            let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
            for buffer in buffers {
                pointers.append((base + offset).assumingMemoryBound(to: CChar.self))
                offset += buffer.count
            }
            return PQexecParams(connection, sql, Int32(buffers.count), types, pointers, lengths, formats, 1)
        }
        guard let result else { throw Failure(description: String(cString: PQerrorMessage(connection))) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return
        default:
            throw Failure(description: String(cString: PQresultErrorMessage(result)))
        }
    }

    /// Waits up to `timeout` milliseconds for the socket to be readable (`poll`), then reads what arrived
    /// (`PQconsumeInput`) and returns the payloads of the notifications received (`PQnotifies`).
    func notifications(timeout: Int32) throws(Failure) -> [String] {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, timeout)
        if ready < 0 && errno != EINTR { throw Failure(description: "poll failed: errno \(errno)") }
        guard ready > 0 else { return [] }
        guard PQconsumeInput(connection) != 0 else {
            throw Failure(description: "the connection was lost: \(String(cString: PQerrorMessage(connection)))")
        }
        var payloads: [String] = []
        while let notification = PQnotifies(connection) {
            payloads.append(String(cString: notification.pointee.extra))
            PQfreemem(notification)
        }
        return payloads
    }
}
