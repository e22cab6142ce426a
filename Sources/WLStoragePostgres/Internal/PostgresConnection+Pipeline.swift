internal import CWLStorageLibPQ
import Foundation

extension PostgresConnection {
    /// Runs `count` transactions in one pipeline (`PQenterPipelineMode`), one round trip: each `BEGIN`, `sql` with
    /// `parameters(index)`, `COMMIT`. Each commits on its own, in order; `committed(index)` is called as its commit is
    /// confirmed (one sent but not confirmed may have happened). A failed statement rolls its transaction back and the
    /// server skips the rest; failures are handled as ``query(_:_:deadline:)`` handles them.
    func runTransactions(
        _ sql: String, count: Int, parameters: (Int) -> [Parameter], committed: (Int) -> Void,
        deadline: ContinuousClock.Instant
    ) throws(PostgresError) {
        try onConnection { connection throws(PostgresError) in
            guard PQenterPipelineMode(connection) == 1 else { throw lost("could not enter pipeline mode", connection) }
            var awaited: [Awaited] = []
            var next = 0  // the first result of `awaited` not yet read
            var sent = 0  // transactions
            var synced = false
            var flushed = true
            var failure: PostgresError?
            while true {
                // The next transaction, or the synchronization point, once libpq has sent all it held.
                if flushed && !synced {
                    if sent < count {
                        try enqueue("BEGIN", [], on: connection)
                        awaited.append(.statement)
                        try enqueue(sql, parameters(sent), on: connection)
                        awaited.append(.statement)
                        try enqueue("COMMIT", [], on: connection)
                        awaited.append(.commit(sent))
                        sent += 1
                    } else {
                        awaited.append(.sync)
                        synced = true
                    }
                    // Results come per transaction, not at the synchronization point: each commit is known when made.
                    guard (synced ? PQpipelineSync(connection) : PQsendFlushRequest(connection)) == 1 else {
                        throw lost("could not send the query", connection)
                    }
                }
                let flush = PQflush(connection)
                guard flush >= 0 else { throw lost("could not send the query", connection) }
                flushed = flush == 0
                try consumeInput(connection)
                // Each result arrived whole: a statement's end with a null result, the synchronization point's do not.
                while next < awaited.count, PQisBusy(connection) == 0 {
                    guard let result = PQgetResult(connection) else {
                        if case .sync = awaited[next] { break }
                        next += 1
                        continue
                    }
                    defer { PQclear(result) }
                    switch (awaited[next], PQresultStatus(result)) {
                    case (.sync, _):
                        next += 1
                    case (_, PGRES_PIPELINE_ABORTED):
                        break  // skipped after a failure
                    case (.commit(let index), PGRES_COMMAND_OK):
                        // A commit of a transaction that failed would answer `ROLLBACK`.
                        if String(cString: PQcmdStatus(result)) == "COMMIT" { committed(index) }
                    case (.statement, PGRES_COMMAND_OK), (.statement, PGRES_TUPLES_OK):
                        break
                    default:
                        failure = failure ?? self.failure(of: result, on: connection)
                    }
                }
                if synced && next == awaited.count { break }
                if let failure, failure.kind == .connectionLost { throw failure }
                if flushed && !synced { continue }
                // Wait to read, and to write when libpq holds bytes the kernel did not take.
                let events = flushed ? Int16(POLLIN) : Int16(POLLIN | POLLOUT)
                try wait(for: PQsocket(connection), events: events, deadline: deadline)
            }
            guard PQexitPipelineMode(connection) == 1 else { throw lost("could not leave pipeline mode", connection) }
            guard let failure else { return }
            // The failed transaction stays open until rolled back; a connection that cannot roll it back is dropped.
            if PQtransactionStatus(connection) != PQTRANS_IDLE {
                do throws(PostgresError) {
                    try send("ROLLBACK", [], on: connection, deadline: deadline)
                    _ = try receive(on: connection, deadline: deadline)
                } catch {
                    throw error.kind == .queryFailed ? PostgresError(.connectionLost, error.message) : error
                }
            }
            throw failure
        }
    }

    /// What the next result of a pipeline answers.
    private enum Awaited {
        /// `BEGIN` or a statement of a transaction.
        case statement
        /// The `COMMIT` of the transaction at this index.
        case commit(Int)
        /// The synchronization point that ends the pipeline.
        case sync
    }
}
