import Foundation
import WLStorage

extension WLStoragePostgresStore {
    /// Stores every write of `batch` in chunks of up to 500 rows and about 4 MiB, each one statement in its own
    /// transaction that notifies its keys' changes at commit, all in one pipeline within the store's timeout.
    ///
    /// Chunks commit in order; after a failed chunk none runs, and ``WLStorageError/storedWrites`` counts the writes
    /// stored from the start. A chunk whose commit was not confirmed in time may still commit; counted as not stored,
    /// it is written again later. A lost connection or a restarting server is retried until the deadline.
    ///
    /// - Throws: ``WLStorageError`` (`writeFailed`) when a chunk did not commit, or it is not known whether it did.
    public func write(_ batch: [WLStorageStoreWrite]) throws {
        guard !batch.isEmpty else { return }
        if batch.count == 1 {
            let parameters = upsertParameters(batch[0].key, batch[0].data)
            _ = try query(statements.upsert, parameters, reading: false, key: batch[0].key, patient: true)
            return
        }
        let chunks = Self.chunks(of: batch)
        var committed = 0  // chunks
        var stored = 0  // writes of the batch
        do throws(WLStorageError) {
            _ = try run(reading: false, key: nil, checking: batch.map(\.key), patient: true) {
                connection, deadline throws(PostgresError) in
                // A retry on a new connection (the idle one was lost) goes on from the first chunk not committed.
                let first = committed
                if chunks.count - first == 1 {
                    // One chunk: one statement, which commits by itself.
                    let chunk = batch[chunks[first]]
                    _ = try connection.query(statements.upsertMany, upsertManyParameters(chunk), deadline: deadline)
                    committed += 1
                    stored += chunk.count
                    return []
                }
                try connection.runTransactions(
                    statements.upsertMany, count: chunks.count - first,
                    parameters: { index in upsertManyParameters(batch[chunks[first + index]]) },
                    committed: { index in
                        committed = first + index + 1
                        stored = chunks[first + index].upperBound
                    }, deadline: deadline)
                return []
            }
        } catch {
            var error = error
            error.storedWrites = stored
            error.message += " (\(stored) of the batch's \(batch.count) values were stored)"
            throw error
        }
    }

    /// Stores each write of `batch` only while its row holds the bytes at the same index of `expected` (`nil`: no row),
    /// in the chunks of ``write(_:)``, one statement each; returns which it stored.
    ///
    /// - Throws: ``WLStorageError`` (`writeFailed`) when a chunk failed or may not have committed; those before stay,
    ///   those after were not sent (``WLStorageError/storedWrites`` counts the writes up to the chunk's end, and
    ///   ``WLStorageError/storedAnswers`` gives the answers of those before it).
    public func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
        guard batch.count == expected.count, Set(batch.map(\.key)).count == batch.count else {
            return try zip(batch, expected).map { try write(key: $0.key, data: $0.data, ifItHolds: $1) }
        }
        var (written, sent, answered) = (Set<String>(), 0, 0)
        do throws(WLStorageError) {
            for chunk in Self.chunks(of: batch) {
                answered = chunk.lowerBound
                let order = chunk.sorted { batch[$0].key < batch[$1].key }  // rows locked in one order
                let parameters =
                    upsertManyParameters(ArraySlice(order.map { batch[$0] })) + [
                        .byteArrays(order.map { expected[$0] ?? Data() }),
                        .texts(order.map { expected[$0] == nil ? "t" : "f" }),
                    ]
                try check(batch[chunk].map(\.key), reading: false)
                sent = chunk.upperBound
                let rows = try run(reading: false, key: nil, resending: false, patient: true) {
                    connection, deadline throws(PostgresError) in
                    try connection.query(statements.writeManyIfHold, parameters, deadline: deadline)
                }
                for case let key?? in rows.map(\.first) { written.insert(String(decoding: key, as: UTF8.self)) }
            }
        } catch {
            var error = error
            error.storedWrites = sent  // the chunks after the one that failed were not sent
            error.storedAnswers = batch[..<answered].map { written.contains($0.key) }
            throw error
        }
        return batch.map { written.contains($0.key) }
    }

    /// The bytes stored under each of `keys` (`nil`: no row), read as ``read(key:)`` reads, a statement per chunk.
    public func read(keys: [String]) throws -> [Data?] {
        try check(keys, reading: true)
        let limit = String(WLStorageSystem.maximumStoredValueSize)
        var found: [String: Data] = [:]
        for start in stride(from: 0, to: keys.count, by: Self.batchRows) {
            let chunk = Array(keys[start..<min(start + Self.batchRows, keys.count)])
            let parameters: [PostgresConnection.Parameter] = [.text(namespace), .texts(chunk), .text(limit)]
            for row in try query(statements.readMany, parameters, reading: true, key: nil) where row.count == 3 {
                guard let key = row[0].map({ String(decoding: $0, as: UTF8.self) }) else { continue }
                guard let value = row[1] else { throw tooLarge(key, size: row[2]) }
                found[key] = value
            }
        }
        return keys.map { found[$0] }
    }

    /// The most rows of one statement: a chunk of a batch, or of a read of several keys.
    static let batchRows = 500
    /// The bytes of values past which a chunk of a batch ends (a chunk holds at least one row).
    static let batchBytes = 4 * 1024 * 1024

    /// The ranges of `batch` written by one statement each.
    static func chunks(of batch: [WLStorageStoreWrite]) -> [Range<Int>] {
        var chunks: [Range<Int>] = []
        var start = 0
        var bytes = 0
        for (index, write) in batch.enumerated() {
            if index > start && (index - start >= batchRows || bytes + write.data.count > batchBytes) {
                chunks.append(start..<index)
                start = index
                bytes = 0
            }
            bytes += write.key.utf8.count + write.data.count
        }
        chunks.append(start..<batch.count)
        return chunks
    }

    /// The parameters of ``Statements/upsertMany`` for `chunk`, a key in it twice written once with its last bytes, in
    /// the keys' order: two programs' batches of the same keys lock their rows in one order, and never deadlock.
    private func upsertManyParameters(_ chunk: ArraySlice<WLStorageStoreWrite>) -> [PostgresConnection.Parameter] {
        var last: [String: Int] = [:]
        for (index, write) in zip(chunk.indices, chunk) { last[write.key] = index }
        let writes = zip(chunk.indices, chunk).filter { last[$0.1.key] == $0.0 }.map(\.1).sorted { $0.key < $1.key }
        return [
            .text(namespace), .texts(writes.map(\.key)), .byteArrays(writes.map(\.data)), .text(statements.channel),
            .texts(writes.map { Self.payload(namespace: namespace, key: $0.key) }),
        ]
    }
}
