import Foundation
import WLStorage

extension WLStoragePostgresStore {
    /// The most tags of updates' writes a row keeps (`recent_tags`): a replica asks about its tag only once it has
    /// reconnected, and other replicas may have written many times meanwhile.
    static let keptTags = 256

    /// The bytes of `key` and their version, read as ``read(key:)`` reads; `WLStorageVersionedRead/untagged(_:)` when the
    /// table cannot keep tags.
    public func readVersioned(key: String) throws -> WLStorageVersionedRead {
        let found = try readWithVersion(key: key)
        if let missing = tagging.withLock({ $0 }) { return .untagged(missing) }
        guard let found else { return .absent }
        return .found(found.data, version: found.version)
    }

    /// The bytes of `key` and their version, read as ``read(key:)`` reads; `nil` when there is no row.
    public func readWithVersion(key: String) throws -> (data: Data, version: Int64)? {
        let limit = WLStorageSystem.maximumStoredValueSize
        let parameters: [PostgresConnection.Parameter] = [.text(namespace), .text(key), .text(String(limit))]
        let rows = try query(statements.readVersioned, parameters, reading: true, key: key)
        guard let row = rows.first, row.count == 3 else { return nil }
        guard let version = row[2].flatMap({ Int64(String(decoding: $0, as: UTF8.self)) }) else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): the row of the key has no version", key: key, path: identity)
        }
        if let value = row[0] { return (value, version) }
        let size = row[1].map { String(decoding: $0, as: UTF8.self) } ?? "?"
        throw WLStorageError(
            code: .valueTooLarge,
            message: "\(identity): the row of the key holds \(size) bytes, more than the largest value read"
                + " (\(limit) bytes, WLStorageSystem.maximumValueSize and what encryption adds); it is not read",
            key: key, path: identity)
    }

    /// Stores `data` under `key` only while its row's version is `version` (for `nil`, while there is no row), in one
    /// statement that puts `tag` first among the row's kept tags, and notifies the change when it wrote. A statement
    /// whose connection is lost is not sent again: the update resends it and asks about its tag (``trace(of:key:)``).
    public func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult
    {
        try check([key], reading: false)
        var sent = false
        let result = execute(reading: false, resending: false) { connection, deadline throws(PostgresError) in
            sent = true
            let sql = version == nil ? statements.createTagged : statements.replaceIfVersion
            let condition: [PostgresConnection.Parameter] = version.map { [.text(String($0))] } ?? []
            return try connection.query(
                sql, upsertParameters(key, data) + [.text(tag.text)] + condition, deadline: deadline)
        }
        switch result {
        case .success(let rows):
            return rows.isEmpty ? .refused : .stored
        case .failure(let error):
            let failure = self.failure(error, reading: false, key: key)
            // Not sent at all, or refused by the server with an error of the statement itself (the connection still
            // up): nothing was committed. Any other failure may have come after the commit.
            if !sent || Self.refusesStatement(error) { return .notStored(failure) }
            throw failure
        }
    }

    /// Whether `error` is the server's refusal of a statement, which committed nothing; not an error that ends the
    /// connection or the server (classes 08, 57), which can come after a commit.
    static func refusesStatement(_ error: PostgresError) -> Bool {
        guard error.kind == .queryFailed, let state = error.sqlState else { return false }
        return ["22", "23", "42", "54"].contains(String(state.prefix(2)))
    }

    /// The row of `key`: its version, whether `tag` is among its kept tags, and how many; `nil` when there is no row.
    public func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
        let rows = try query(
            statements.trace, [.text(namespace), .text(key), .text(tag.text)], reading: true, key: key)
        guard let row = rows.first else { return nil }
        let texts = row.map { $0.map { String(decoding: $0, as: UTF8.self) } }
        guard texts.count == 3, let version = texts[0].flatMap({ Int64($0) }), let kept = texts[2].flatMap({ Int($0) })
        else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): the row of the key has no version or tags", key: key,
                path: identity)
        }
        return WLStorageTagTrace(
            version: version, tagFound: texts[1] == "true", tagsKept: kept, capacity: Self.keptTags)
    }
}

/// The store's updates write on condition of the row's version, tagged (see `WLStorageVersionedStore`), and its
/// notifications carry the changes (see ``WLStorageCarriedChange``).
extension WLStoragePostgresStore: WLStorageVersionedStore {}
