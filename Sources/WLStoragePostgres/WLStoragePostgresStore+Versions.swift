import Foundation
import WLStorage

extension WLStoragePostgresStore {
    /// The bytes of `key` and their version, read as ``read(key:)`` reads; `WLStorageVersionedRead/untagged(_:)` when the
    /// store cannot record tags in `<table>_writes`, which it could not create, or the role may not write.
    public func readVersioned(key: String) throws -> WLStorageVersionedRead {
        let found = try readWithVersion(key: key)
        guard recordsWrites.load(ordering: .relaxed) else {
            return .untagged(
                WLStorageError(
                    code: .invalidConfiguration,
                    message: "\(identity): the store cannot record the tags of its writes, which makes an update whose"
                        + " answer is lost exactly once, in the table \(table)_writes: it could not create it, may not"
                        + " write it, or it is unlogged, which a crash empties (make it logged). Updates compare bytes"
                        + " instead, and an update whose answer is lost can then be made twice or taken for another's."
                        + " Have the schema's owner run: \(statements.createWrites); and grant SELECT, INSERT, UPDATE,"
                        + " DELETE on it to the store's role",
                    path: identity))
        }
        guard let found else { return .absent }
        return .found(found.data, version: found.version)
    }

    /// The bytes of `key` and their version, read as ``read(key:)`` reads; `nil` when there is no row.
    public func readWithVersion(key: String) throws -> (data: Data, version: Int64)? {
        let limit = String(WLStorageSystem.maximumStoredValueSize)
        let parameters: [PostgresConnection.Parameter] = [.text(namespace), .text(key), .text(limit)]
        let rows = try query(statements.readVersioned, parameters, reading: true, key: key)
        guard let row = rows.first, row.count == 3 else { return nil }
        guard let version = row[2].flatMap({ Int64(String(decoding: $0, as: UTF8.self)) }) else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): the row of the key has no version", key: key, path: identity)
        }
        if let value = row[0] { return (value, version) }
        throw tooLarge(key, size: row[1])
    }

    /// The error of a row too large to read, of `size` bytes (as text).
    func tooLarge(_ key: String, size: Data?) -> WLStorageError {
        WLStorageError(
            code: .valueTooLarge,
            message: "\(identity): the row of the key holds \(size.map { String(decoding: $0, as: UTF8.self) } ?? "?")"
                + " bytes, more than the largest value read (\(WLStorageSystem.maximumStoredValueSize) bytes,"
                + " WLStorageSystem.maximumValueSize and what encryption adds); it is not read", key: key,
            path: identity)
    }

    /// Stores `data` under `key` only while its row's version is `version` (for `nil`, while there is no row), in one
    /// statement that records `tag` in `<table>_writes`, and notifies the change when it wrote. A statement whose
    /// connection is lost is not sent again: the update resends it and asks about its tag (``trace(of:key:)``).
    public func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult
    {
        try check([key], reading: false)
        var sent = false
        var node = 0
        let result = execute(reading: false, resending: false) { connection, deadline throws(PostgresError) in
            sent = true
            node = writesNode.load(ordering: .relaxed)
            let sql = version == nil ? statements.recordedCreate : statements.replaceIfVersion
            let condition: [PostgresConnection.Parameter] = version.map { [.text(String($0))] } ?? []
            return try connection.query(
                sql, upsertParameters(key, data) + [.text(tag.text)] + condition, deadline: deadline)
        }
        switch result {
        case .success(let rows):
            countRecordedWrite()
            if !rows.isEmpty { lostWrites.withLock { $0[tag.text] = nil } }  // stored by a resend: no trace follows
            return rows.isEmpty ? .refused : .stored
        case .failure(let error):
            let failure = self.failure(error, reading: false, key: key)
            // Not sent at all, or refused by the server with an error of the statement itself (the connection still
            // up): nothing was committed. Any other failure may have come after the commit.
            if !sent || Self.refusesStatement(error) { return .notStored(failure) }
            lostWrites.withLock { $0[tag.text] = $0[tag.text] ?? node }
            throw failure
        }
    }

    /// Whether `error` is the server's refusal of a statement, raised before its commit (a trigger's, a full disk, a
    /// deadlock); not one that can come after a commit: the connection or server ending (08, 57), out of memory (53200).
    static func refusesStatement(_ error: PostgresError) -> Bool {
        guard error.kind == .queryFailed, let state = error.sqlState else { return false }
        return ["22", "23", "25", "42", "53100", "53400", "54", "P0", "40001", "40P01"].contains { state.hasPrefix($0) }
    }

    /// The version of `key`'s row (`nil`: none), and whether the write tagged `tag` was made (claimed: if not, never).
    public func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
        let node = lostWrites.withLock { $0[tag.text] } ?? writesNode.load(ordering: .relaxed)
        let rows = try query(
            statements.trace, [.text(namespace), .text(key), .text(tag.text), .text(String(node))], reading: false,
            key: key, patient: true)
        guard let row = rows.first else { return nil }
        let texts = row.map { $0.map { String(decoding: $0, as: UTF8.self) } }
        guard texts.count == 2, let version = texts[0].flatMap({ Int64($0) }) else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): the row of the key has no version", key: key, path: identity)
        }
        guard let written = texts[1] else { throw emptiedTags(key) }
        lostWrites.withLock { $0[tag.text] = nil }
        // Exact however many writes came since: one tag kept, of one.
        return WLStorageTagTrace(version: version, tagFound: written == "true", tagsKept: 0, capacity: 1)
    }

    /// The failure of a write whose answer was lost once its tag cannot tell: `<table>_writes` was emptied since.
    func emptiedTags(_ key: String) -> WLStorageError {
        WLStorageError(
            code: .writeFailed,
            message: "\(identity): whether a write was made is not known: its answer was lost, and"
                + " \(table)_writes, which held its tag, was truncated or dropped since", key: key, path: identity)
    }
}

/// Updates write on condition of the row's version, tagged; notifications carry changes (``WLStorageCarriedChange``).
extension WLStoragePostgresStore: WLStorageVersionedStore {
    /// `true`: a write on condition of the row's bytes records a tag too, and claims it after a lost answer
    /// (``write(key:data:ifItHolds:)``), so a storage's change is written in one statement, with no read before it.
    public var settlesLostAnswers: Bool { true }
}
