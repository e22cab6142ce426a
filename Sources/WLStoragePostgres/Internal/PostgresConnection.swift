internal import CWLStorageLibPQ
import Foundation

/// One libpq connection in non-blocking mode: no wait outlasts the deadline it is given.
final class PostgresConnection: @unchecked Sendable {  // used under the owner's lock or on the owner's queue only
    enum State {
        /// No connection: the next ``connect(deadline:)`` makes one.
        case disconnected
        /// Connected and ready for a query; `pid` is the server process serving it (`PQbackendPID`).
        case connected(OpaquePointer, pid: Int32)
        /// Closed for good by ``close()``: it never connects again.
        case closed
    }

    /// A value of a query parameter, sent in binary form with its type given.
    enum Parameter {
        case text(String)
        case bytes(Data)
        /// A one-dimensional `text[]` without NULLs.
        case texts([String])
        /// A one-dimensional `bytea[]` without NULLs.
        case byteArrays([Data])
    }

    /// A notification received with `LISTEN`.
    struct Notification: Sendable {
        var channel: String
        var payload: String
        /// The server process that sent it.
        var pid: Int32
    }

    let settings: PostgresSettings
    private(set) var state = State.disconnected

    init(settings: PostgresSettings) { self.settings = settings }

    deinit { close() }

    /// The server process of the connection (`PQbackendPID`), when connected.
    var backendPID: Int32? {
        if case .connected(_, let pid) = state { pid } else { nil }
    }

    /// The connection's socket, when connected. It belongs to libpq, which closes it when the connection ends.
    var socket: Int32? {
        if case .connected(let connection, _) = state { PQsocket(connection) } else { nil }
    }

    /// Connects, unless connected: `PQconnectStartParams`, then `PQconnectPoll` and `poll` until `deadline`.
    func connect(deadline: ContinuousClock.Instant) throws(PostgresError) {
        switch state {
        case .connected: return
        case .closed: throw PostgresError(.connectionFailed, "the connection was closed")
        case .disconnected: break
        }
        // libpq copies the options: the C strings are freed at once.
        let keywords = settings.keywords.map { UnsafePointer(strdup($0)) } + [nil]
        let values = settings.values.map { UnsafePointer(strdup($0)) } + [nil]
        let connection = PQconnectStartParams(keywords, values, 0)
        for pointer in keywords + values { free(UnsafeMutablePointer(mutating: pointer)) }
        guard let connection else { throw PostgresError(.connectionFailed, "libpq could not allocate a connection") }
        // Notices (such as "relation already exists, skipping") would be printed on standard error.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        do throws(PostgresError) {
            var polling = PQstatus(connection) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING
            while polling != PGRES_POLLING_OK {
                switch polling {
                case PGRES_POLLING_READING, PGRES_POLLING_WRITING:
                    let events = Int16(polling == PGRES_POLLING_READING ? POLLIN : POLLOUT)
                    try wait(for: PQsocket(connection), events: events, deadline: deadline, connecting: true)
                case PGRES_POLLING_FAILED:
                    throw PostgresError(.connectionFailed, "could not connect: \(message(of: connection))")
                default:
                    break
                }
                polling = PQconnectPoll(connection)
            }
            guard PQsetnonblocking(connection, 1) == 0 else {
                throw PostgresError(.connectionFailed, "could not switch to non-blocking: \(message(of: connection))")
            }
        } catch {
            PQfinish(connection)
            throw error
        }
        state = .connected(connection, pid: PQbackendPID(connection))
    }

    /// Runs one statement and returns its rows of column values (`nil`: SQL NULL). A passed deadline cancels it
    /// (`PQcancel`) and drops the connection, as a break does; the next ``connect(deadline:)`` makes a new one.
    func query(
        _ sql: String, _ parameters: [Parameter] = [], deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> [[Data?]] {
        try onConnection { connection throws(PostgresError) in
            try send(sql, parameters, on: connection, deadline: deadline)
            return try receive(on: connection, deadline: deadline)
        }
    }

    /// Runs `body` as ``query(_:_:deadline:)`` runs: a timeout cancels; any failure but a refusal drops the connection.
    func onConnection<R>(_ body: (OpaquePointer) throws(PostgresError) -> R) throws(PostgresError) -> R {
        guard case .connected(let connection, _) = state else { throw PostgresError(.connectionLost, "not connected") }
        do {
            return try body(connection)
        } catch {
            if error.kind == .timedOut { Self.cancel(connection) }
            if error.kind != .queryFailed || PQstatus(connection) == CONNECTION_BAD { disconnect() }
            throw error
        }
    }

    /// Reads what arrived (`PQconsumeInput`) and returns the notifications received (`PQnotifies`); throws, and drops
    /// the connection, when it broke. Reads until the socket is empty: a connection's end can come with the server's
    /// last message, and no later readiness event tells of it.
    func notifications() throws(PostgresError) -> [Notification] {
        try onConnection { connection throws(PostgresError) in
            var received: [Notification] = []
            while true {
                try consumeInput(connection)
                guard PQstatus(connection) != CONNECTION_BAD else { throw lost("the connection was lost", connection) }
                while let notification = PQnotifies(connection) {
                    received.append(
                        Notification(
                            channel: String(cString: notification.pointee.relname),
                            payload: String(cString: notification.pointee.extra),
                            pid: notification.pointee.be_pid))
                    PQfreemem(notification)
                }
                var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
                guard descriptor.fd >= 0 else { throw PostgresError(.connectionLost, "the connection was lost") }
                if poll(&descriptor, 1, 0) <= 0 { return received }
            }
        }
    }

    /// Ends the connection (`PQfinish`); the next ``connect(deadline:)`` makes a new one.
    func disconnect() {
        if case .connected(let connection, _) = state {
            PQfinish(connection)
            state = .disconnected
        }
    }

    /// Ends the connection for good.
    func close() {
        disconnect()
        state = .closed
    }

    // MARK: - Sending and receiving

    func send(
        _ sql: String, _ parameters: [Parameter], on connection: OpaquePointer, deadline: ContinuousClock.Instant
    ) throws(PostgresError) {
        try enqueue(sql, parameters, on: connection)
        while true {
            let flushed = PQflush(connection)
            if flushed == 0 { return }
            guard flushed > 0 else { throw lost("could not send the query", connection) }
            try wait(for: PQsocket(connection), events: Int16(POLLOUT | POLLIN), deadline: deadline)
            try consumeInput(connection)
        }
    }

    /// Hands one statement to libpq (`PQsendQueryParams`, binary parameters and results), into its output buffer.
    func enqueue(_ sql: String, _ parameters: [Parameter], on connection: OpaquePointer) throws(PostgresError) {
        // Every parameter and result in binary; parameter types: text 25, bytea 17, text[] 1009, bytea[] 1001.
        let encoded: [(type: Oid, value: Data)] = parameters.map {
            switch $0 {
            case .text(let text): (25, Data(text.utf8))
            case .bytes(let data): (17, data)
            case .texts(let texts): (1009, Self.binaryArray(of: texts.map { Data($0.utf8) }, elementType: 25))
            case .byteArrays(let elements): (1001, Self.binaryArray(of: elements, elementType: 17))
            }
        }
        let (types, values) = (encoded.map(\.type), encoded.map(\.value))
        let lengths = values.map { Int32($0.count) }
        let formats = [Int32](repeating: 1, count: parameters.count)
        // One allocation for all parameters, alive for the call (libpq copies it into its output).
        let total = values.reduce(0) { $0 + $1.count }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { storage.deallocate() }
        var pointers: [UnsafePointer<CChar>?] = []
        pointers.reserveCapacity(parameters.count)
        var offset = 0
        for value in values {
            let start = storage.baseAddress! + offset
            _ = value.copyBytes(to: UnsafeMutableRawBufferPointer(start: start, count: value.count))
            pointers.append(UnsafePointer(start.assumingMemoryBound(to: CChar.self)))
            offset += value.count
        }
        let sent = PQsendQueryParams(connection, sql, Int32(parameters.count), types, pointers, lengths, formats, 1)
        guard sent != 0 else { throw lost("could not send the query", connection) }
    }

    /// A one-dimensional array without NULLs in PostgreSQL's binary format (`array_recv`): dimensions, NULLs flag,
    /// element type, length, lower bound, then each element's length and bytes; every integer big-endian, 32 bits.
    private static func binaryArray(of elements: [Data], elementType: Oid) -> Data {
        var array = Data(capacity: 20 + elements.reduce(0) { $0 + 4 + $1.count })
        func append(_ value: Int32) { withUnsafeBytes(of: value.bigEndian) { array.append(contentsOf: $0) } }
        for header: Int32 in [1, 0, Int32(bitPattern: elementType), Int32(elements.count), 1] { append(header) }
        for element in elements {
            append(Int32(element.count))
            array.append(element)
        }
        return array
    }

    func receive(on connection: OpaquePointer, deadline: ContinuousClock.Instant) throws(PostgresError) -> [[Data?]] {
        var rows: [[Data?]] = []
        var failure: PostgresError?
        while true {
            while PQisBusy(connection) != 0 {
                try wait(for: PQsocket(connection), events: Int16(POLLIN), deadline: deadline)
                try consumeInput(connection)
            }
            guard let result = PQgetResult(connection) else { break }
            defer { PQclear(result) }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                rows = []
            case PGRES_TUPLES_OK:
                let columns = 0..<PQnfields(result)
                rows = (0..<PQntuples(result)).map { row in
                    columns.map { column in
                        guard PQgetisnull(result, row, column) == 0 else { return nil }
                        return Data(
                            bytes: PQgetvalue(result, row, column), count: Int(PQgetlength(result, row, column)))
                    }
                }
            default:
                failure = failure ?? self.failure(of: result, on: connection)
            }
        }
        if let failure { throw failure }
        return rows
    }

    /// The error a failed `result` reports, with its SQLSTATE, without secrets.
    func failure(of result: OpaquePointer, on connection: OpaquePointer) -> PostgresError {
        let text = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let lost = PQstatus(connection) == CONNECTION_BAD
        return PostgresError(
            lost ? .connectionLost : .queryFailed, settings.redact(text.isEmpty ? message(of: connection) : text),
            sqlState: state)
    }

    /// Waits with `poll` until `socket` is ready for `events`, or throws when `deadline` passes.
    func wait(
        for socket: Int32, events: Int16, deadline: ContinuousClock.Instant, connecting: Bool = false
    ) throws(PostgresError) {
        guard socket >= 0 else { throw PostgresError(.connectionLost, "the connection has no socket") }
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else {
                throw PostgresError(
                    .timedOut,
                    connecting ? "connecting timed out" : "the server did not answer in time; query cancelled")
            }
            let (seconds, attoseconds) = remaining.components
            // Any timeout the store was given, however long: a wait longer than `Int32.max` ms polls again.
            let milliseconds = Int32(
                clamping: min(seconds, Int64(Int32.max)) * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR {
                throw PostgresError(.connectionLost, "poll failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Asks the server to cancel the running query (`PQcancel`) on another thread, unawaited: it opens a connection.
    static func cancel(_ connection: OpaquePointer) {
        guard let cancel = PQgetCancel(connection) else { return }
        nonisolated(unsafe) let request = cancel  // used by the one thread that sends it
        DispatchQueue.global().async {
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(request, &buffer, Int32(buffer.count))
            PQfreeCancel(request)
        }
    }

    /// Reads what arrived (`PQconsumeInput`); throws when the connection broke.
    func consumeInput(_ connection: OpaquePointer) throws(PostgresError) {
        guard PQconsumeInput(connection) != 0 else { throw lost("the connection was lost", connection) }
    }

    /// A lost connection's error: `what`, then the connection's last error.
    func lost(_ what: String, _ connection: OpaquePointer) -> PostgresError {
        PostgresError(.connectionLost, "\(what): \(message(of: connection))")
    }

    /// The connection's last error (`PQerrorMessage`), without secrets.
    func message(of connection: OpaquePointer) -> String {
        let text = String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines)
        // libpq's lines after the first are indented with a tab: one line, its parts joined by "; ".
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        return settings.redact(text.isEmpty ? "no message from libpq" : lines.joined(separator: "; "))
    }
}
