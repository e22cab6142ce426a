import Foundation
import WLStorage

extension WLStoragePostgresStore {
    func upsertParameters(_ key: String, _ data: Data) -> [PostgresConnection.Parameter] {
        [
            .text(namespace), .text(key), .bytes(data), .text(statements.channel),
            .text(Self.payload(namespace: namespace, key: key)),
        ]
    }

    /// Runs `body` as ``execute(reading:resending:patient:_:)`` does, and throws its failure as a ``WLStorageError``.
    func run(
        reading: Bool, key: String?, checking keys: [String] = [], resending: Bool = true, patient: Bool = false,
        _ body: (PostgresConnection, ContinuousClock.Instant) throws(PostgresError) -> [[Data?]]
    ) throws(WLStorageError) -> [[Data?]] {
        try check((key.map { [$0] } ?? []) + keys, reading: reading)
        return try execute(reading: reading, resending: resending, patient: patient, body).mapError {
            failure($0, reading: reading, key: key)
        }.get()
    }

    /// The parameters of ``Statements/remove`` (or, with `data`, ``Statements/removeIfHolds``) for `key`.
    func removalParameters(_ key: String, _ data: Data? = nil) -> [PostgresConnection.Parameter] {
        [.text(namespace), .text(key)] + (data.map { [.bytes($0)] } ?? [])
            + [.text(statements.channel), .text(Self.removalPayload(namespace: namespace, key: key))]
    }

    /// Runs `sql` with `parameters` as ``run(reading:key:checking:resending:patient:_:)`` runs its statements.
    func query(
        _ sql: String, _ parameters: [PostgresConnection.Parameter], reading: Bool, key: String?,
        resending: Bool = true, patient: Bool = false
    ) throws(WLStorageError) -> [[Data?]] {
        try run(reading: reading, key: key, resending: resending, patient: patient) {
            connection, deadline throws(PostgresError) in
            try connection.query(sql, parameters, deadline: deadline)
        }
    }

    /// Throws when one of `keys` cannot be stored: PostgreSQL's `text` holds no NUL character.
    func check(_ keys: [String], reading: Bool) throws(WLStorageError) {
        for checked in keys where checked.utf8.contains(0) {
            throw WLStorageError(
                code: reading ? .readFailed : .writeFailed,
                message: "\(identity): a PostgreSQL store cannot hold a key with a NUL character", key: checked,
                path: identity)
        }
    }

    /// Runs `body` on the writing connection, connected (and the table created) first when needed. A connection lost
    /// before `body` ran, or under a read, is made again a few times within the deadline; a write that fails on an idle
    /// connection lost meanwhile is run once more unless `resending` is off. A `patient` call, and every call once the
    /// flush at exit has begun, also retries with backoff after a server restart or failover (``isTransient(_:)``),
    /// unless `body` ran and `resending` is off.
    func execute(
        reading: Bool, resending: Bool, patient: Bool = false,
        _ body: (PostgresConnection, ContinuousClock.Instant) throws(PostgresError) -> [[Data?]]
    ) -> Result<[[Data?]], PostgresError> {
        // The deadline counts from the call, not from taking the lock: a call queued behind others that each spend
        // their timeout (a server that does not answer) must not wait for all of them.
        let deadline = ContinuousClock.now + timeout
        return writer.withLock { connection -> Result<[[Data?]], PostgresError> in
            guard ContinuousClock.now < deadline else {
                return .failure(PostgresError(.timedOut, "timed out waiting for the store's other calls to end"))
            }
            // A connection the server ended while idle (it restarted, say) is made anew before a statement is sent on it.
            if connection.backendPID != nil, (try? connection.notifications()) == nil { writerPID.value = nil }
            var retried = false
            var reconnections = 0
            var failures = 0
            while true {
                let reused = connection.backendPID != nil
                var started = false
                do throws(PostgresError) {
                    if !reused {
                        try connection.connect(deadline: deadline)
                        writerPID.value = connection.backendPID
                        try prepareTable(connection, deadline: deadline)
                    }
                    started = true
                    return .success(try body(connection, deadline))
                } catch {
                    if connection.backendPID == nil { writerPID.value = nil }
                    if error.kind == .connectionLost, !started || reading, reconnections < 4,
                        ContinuousClock.now < deadline
                    {
                        reconnections += 1
                        usleep(UInt32(5_000 * reconnections))
                        continue
                    }
                    if reused, !retried, resending, error.kind == .connectionLost {
                        retried = true
                        continue
                    }
                    // The table was dropped by someone else: a new connection creates it again. A write refused while
                    // tags are recorded (the privileges on `<table>_writes` revoked): a new one asks whether they can be.
                    let revoked = error.sqlState == "42501" && !reading && recordsWrites.load(ordering: .relaxed)
                    if !retried, error.sqlState == "42P01" || revoked {
                        retried = true
                        connection.disconnect()
                        writerPID.value = nil
                        continue
                    }
                    if patient || WLStorageSystem.isFlushingAtExit, Self.isTransient(error), !started || resending {
                        failures += 1
                        let pause = Duration.milliseconds(min(10 << min(failures - 1, 5), 250))
                        if ContinuousClock.now.duration(to: deadline) > pause {
                            connection.disconnect()
                            writerPID.value = nil
                            usleep(UInt32(pause / .microseconds(1)))
                            continue
                        }
                    }
                    return .failure(error)
                }
            }
        }
    }

    /// Whether `error` passes once a restarting or failing-over server is back: a connection refused, failed or
    /// broken, or a statement ended by a shutdown (57P01, 57P02, 57P03) or a connection exception (class 08).
    static func isTransient(_ error: PostgresError) -> Bool {
        switch error.kind {
        case .connectionFailed, .connectionLost: true
        case .queryFailed:
            error.sqlState.map { ["57P01", "57P02", "57P03"].contains($0) || $0.hasPrefix("08") } ?? false
        case .invalidSettings, .timedOut: false
        }
    }

    func failure(_ error: PostgresError, reading: Bool, key: String?) -> WLStorageError {
        // A program limit on a write: in this table, the index of the namespace and key.
        let hint =
            !reading && error.sqlState == "54000"
            ? "; the key is too long for the table's index, which takes at most about 2,700 bytes of a namespace"
                + " and a key once compressed" : ""
        return WLStorageError(
            code: reading ? .readFailed : .writeFailed,
            message: "\(identity) could not \(reading ? "read" : "write"): \(error.message)\(hint)", key: key,
            path: identity, underlying: error)
    }

    /// Creates the table and `<table>_writes` when missing; `to_regclass` first, as `IF NOT EXISTS` needs `CREATE`.
    private func prepareTable(_ connection: PostgresConnection, deadline: ContinuousClock.Instant) throws(PostgresError)
    {
        do {
            var state = try connection.query(statements.tableState, deadline: deadline).first
            if state == nil {
                _ = try create(statements.createTable, connection, deadline, orThrow: true)
                state = try connection.query(statements.tableState, deadline: deadline).first
            }
            if state?.first.flatMap({ $0 }) == nil, try create(statements.createWrites, connection, deadline) {
                state = try connection.query(statements.tableState, deadline: deadline).first
            }
            recordsWrites.store(state?.first == Data("true".utf8), ordering: .relaxed)
            let node = state?.last.flatMap { $0 }.flatMap { Int(String(decoding: $0, as: UTF8.self)) }
            writesNode.store(node ?? 0, ordering: .relaxed)
        } catch {
            connection.disconnect()
            throw error
        }
    }

    /// Runs `creation`, a `CREATE TABLE IF NOT EXISTS`, and returns whether it ran; a creation that raced another
    /// connection's is run again. Refused (no `CREATE` on the schema), it returns `false` unless `orThrow`.
    private func create(
        _ creation: String, _ connection: PostgresConnection, _ deadline: ContinuousClock.Instant, orThrow: Bool = false
    ) throws(PostgresError) -> Bool {
        do {
            _ = try connection.query(creation, deadline: deadline)
        } catch  where error.kind == .queryFailed && Self.concurrentCreation.contains(error.sqlState ?? "") {
            _ = try connection.query(creation, deadline: deadline)
        } catch  where error.kind == .queryFailed && !orThrow {
            return false
        }
        return true
    }

    /// A creation of the table that raced another's: a catalog unique violation, the table or its row type there.
    static let concurrentCreation: Set<String> = ["23505", "42P07", "42710"]
}
