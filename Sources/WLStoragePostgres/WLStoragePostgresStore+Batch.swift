import Foundation
import WLStorage

extension WLStoragePostgresStore {
    /// Stores every write of `batch`, in chunks of up to ``batchRows`` rows and about ``batchBytes`` bytes, each one
    /// statement (`INSERT … SELECT … FROM unnest(…) ON CONFLICT … DO UPDATE`) that commits on its own and notifies the
    /// change of each of its keys at its commit. A batch of 1,000 keys costs two round trips to the server, not 1,000.
    ///
    /// The whole batch has one deadline, the store's timeout. When it passes, or a chunk fails, the chunks already
    /// committed stay committed, and the error says how many writes, from the start of the batch, were stored
    /// (``WLStorageError/storedWrites``): the storages of the others keep their values pending.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when a chunk did not commit, or it is not known whether
    ///   it did.
    public func write(_ batch: [WLStorageStoreWrite]) throws {
        guard !batch.isEmpty else { return }
        if batch.count == 1 { return try write(key: batch[0].key, data: batch[0].data) }
        let chunks = Self.chunks(of: batch)
        var committed = 0  // chunks
        var stored = 0  // writes of the batch
        do throws(WLStorageError) {
            _ = try run(reading: false, key: nil, checking: batch.map(\.key)) {
                connection, deadline throws(PostgresError) in
                // A retry on a new connection (the idle one was lost) goes on from the first chunk not committed.
                while committed < chunks.count {
                    let chunk = batch[chunks[committed]]
                    _ = try connection.query(statements.upsertMany, upsertManyParameters(chunk), deadline: deadline)
                    committed += 1
                    stored += chunk.count
                }
                return []
            }
        } catch {
            var error = error
            error.storedWrites = stored
            error.message += " (\(stored) of the batch's \(batch.count) values were stored)"
            throw error
        }
    }

    /// The most rows of one statement of a batch.
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

    /// The parameters of ``Statements/upsertMany`` for `chunk`. A key written twice in it is written once, with its
    /// last bytes (one statement cannot change a row twice).
    private func upsertManyParameters(_ chunk: ArraySlice<WLStorageStoreWrite>) -> [PostgresConnection.Parameter] {
        var last: [String: Int] = [:]
        for (index, write) in zip(chunk.indices, chunk) { last[write.key] = index }
        let writes = zip(chunk.indices, chunk).filter { last[$0.1.key] == $0.0 }.map(\.1)
        return [
            .text(namespace), .texts(writes.map(\.key)), .byteArrays(writes.map(\.data)), .text(statements.channel),
            .texts(writes.map { Self.payload(namespace: namespace, key: $0.key) }),
        ]
    }
}
