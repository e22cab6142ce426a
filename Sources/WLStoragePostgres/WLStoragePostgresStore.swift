import Foundation
import Synchronization
import WLStorage

/// A store that keeps values in a PostgreSQL table, one row per namespace and key, and tells its storages about
/// changes made by other programs and machines through `LISTEN`/`NOTIFY`.
///
/// ```swift
/// let store = try WLStoragePostgresStore(
///     url: "postgresql://app@db.example.com/app?sslmode=verify-full", namespace: "settings")
/// @WLStorage(key: "theme", defaultValue: "dark", store: store) var theme: String
/// ```
///
/// The table is created at the first connection if missing. Every write adds one to its row's `version` and notifies
/// `<table>_changes` in the same statement; ``WLStorage/update(_:)`` writes on condition of the version, tagged, so it
/// is made exactly once. The store connects at first use; no wait outlasts its timeout. See the article on sharing
/// values across machines.
///
/// - Important: Keys must not contain NUL, which PostgreSQL's `text` cannot hold. A key's index entry must fit in a
///   B-tree page after compression (about 2,700 bytes): the server refuses longer keys that do not compress.
public final class WLStoragePostgresStore: WLStorageConditionalStore, CustomStringConvertible {
    /// `postgresql://host:port/dbname?table=<table>#<namespace>`, never the password. For a table named without its
    /// schema, the connection's search path follows (`&search_path=staging`), so stores of two schemas are two stores.
    public let identity: String
    /// The namespace the store's keys live in: stores with different namespaces in one table hold different values.
    public let namespace: String
    /// The table that holds the values.
    public let table: String
    /// How long any wait of the store lasts at most: connecting, or running a statement.
    public let timeout: Duration

    // Lock order: `writer` (held for one call: a connection and a statement, each bounded by the timeout), then
    // `writerPID`, a leaf. The listener's lock is never taken with them; feed handlers run outside all.
    let settings: PostgresSettings
    let statements: Statements
    /// The connection for reads and writes; its lock serializes the store's statements.
    let writer: Locked<PostgresConnection>
    /// The server process of the writing connection, read by the listener to tell the store's own notifications.
    let writerPID = Locked<Int32?>(nil)
    /// Whether writes on condition record their tags in `<table>_writes`, as the last connection found.
    let recordsWrites = Atomic<Bool>(false)
    /// How many writes recorded their tags: old tags are removed at every 1,000th.
    let recordedWrites = Atomic<Int>(0)
    /// The file node of `<table>_writes` as last found, and by tag the node each write whose answer was lost was sent
    /// with, until traced: a claim checks that the table was not emptied since.
    let writesNode = Atomic<Int>(0)
    let lostWrites = Locked<[String: Int]>([:])
    let listener: PostgresListener
    /// Whether replicas take carried values from every sender, not only from roles that may update the table.
    public let adoptsNotifiedValues: Bool

    /// Creates a store of the values of `namespace` in `table` of the database at `url`. It does not connect yet.
    ///
    /// - Parameters:
    ///   - url: A libpq connection string: a `postgresql://` URI, or `key=value` pairs (`host=/run/db port=5432`).
    ///     Libpq's environment variables (`PGHOST`, `PGPASSWORD`, …) and password file apply as usual. Over a network,
    ///     set `sslmode=verify-full`: libpq's default, `prefer`, checks no certificate and falls back to plain text.
    ///   - namespace: The namespace of the keys, so programs can share one table: 1 to 1,000 bytes, no NUL.
    ///   - table: The table's name, `name` or `schema.name`, each part `[A-Za-z_][A-Za-z0-9_]*` and at most 48 bytes.
    ///   - timeout: How long to wait at most to connect, or for a statement to complete.
    ///   - adoptsNotifiedValues: Whether a replica takes the value a notification carries from every sender, not only
    ///     from a process whose role may update the table. Any role that can connect may notify: turn it on only when
    ///     every such role may write the table. The first store of an identity a process follows decides it there.
    /// - Throws: `WLStorageError.Code.invalidConfiguration` when libpq cannot parse `url`, or `table`
    ///   or `namespace` is not valid. The message never contains the password.
    public init(
        url: String, namespace: String = "default", table: String = "wlstorage", timeout: Duration = .seconds(10),
        adoptsNotifiedValues: Bool = false
    ) throws(WLStorageError) {
        self.adoptsNotifiedValues = adoptsNotifiedValues
        do {
            self.settings = try PostgresSettings(url: url, timeout: timeout)
        } catch {
            throw WLStorageError(code: .invalidConfiguration, message: "invalid PostgreSQL connection string: \(error)")
        }
        guard Self.isValidTable(table) else {
            throw WLStorageError(
                code: .invalidConfiguration,
                message: "invalid table name \"\(table)\": use name or schema.name, each part of letters, digits and"
                    + " underscores, not starting with a digit, at most 48 bytes")
        }
        guard !namespace.isEmpty, namespace.utf8.count <= 1000, !namespace.utf8.contains(0) else {
            throw WLStorageError(
                code: .invalidConfiguration, message: "invalid namespace: it must be 1 to 1000 bytes, without NUL")
        }
        guard timeout > .zero else {
            throw WLStorageError(code: .invalidConfiguration, message: "the timeout must be positive")
        }
        self.namespace = namespace
        self.table = table
        self.timeout = timeout
        // A table named without its schema is found through the search path: a connection that sets one says so.
        let searchPath =
            table.contains(".") ? "" : settings.searchPath.map { "&search_path=\(PostgresSettings.escape($0))" } ?? ""
        self.identity =
            "\(settings.location)?table=\(PostgresSettings.escape(table))\(searchPath)"
            + "#\(PostgresSettings.escape(namespace))"
        self.statements = Statements(table: table)
        self.writer = Locked(PostgresConnection(settings: settings))
        let pid = writerPID
        self.listener = PostgresListener(
            settings: settings, channel: statements.channel, table: statements.quotedName, namespace: namespace,
            timeout: timeout, identity: identity, trustsEveryRole: adoptsNotifiedValues, ownPID: { pid.value })
    }

    /// `WLStoragePostgresStore(<identity>)`.
    public var description: String { "WLStoragePostgresStore(\(identity))" }

    /// Why the change feed cannot hear other programs' changes now, or `nil` while it listens (or no storage follows
    /// the store); also reported to ``WLStorageSystem/errorHandler`` when it starts and once a minute while it lasts.
    public var changeFeedError: WLStorageError? { listener.trouble }

    // MARK: - WLStorageStore

    /// The bytes stored under `key` in the store's namespace, or `nil` when there is no row. A row larger than
    /// ``WLStorageSystem/maximumValueSize`` (plus what encryption adds) is not fetched.
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when the server cannot be reached, does not answer
    ///   within the timeout, or refuses the statement; ``WLStorageError/Code/valueTooLarge`` for a row too large.
    public func read(key: String) throws -> Data? { try readWithVersion(key: key)?.data }

    /// Stores `data` under `key` (an upsert), and notifies the change.
    ///
    /// - Throws: ``WLStorageError`` (`writeFailed`) when nothing was stored, or it is not known whether it was.
    public func write(key: String, data: Data) throws { _ = try writeWithVersion(key: key, data: data) }

    /// Stores `data` under `key` as ``write(key:data:)`` does, and returns the row's version after the write.
    ///
    /// - Throws: As ``write(key:data:)``.
    public func writeWithVersion(key: String, data: Data) throws -> Int64? {
        let rows = try query(statements.upsert, upsertParameters(key, data), reading: false, key: key)
        return rows.first?.last.flatMap { $0 }.flatMap { Int64(String(decoding: $0, as: UTF8.self)) }
    }

    /// Stores `data` under `key` unless a row exists (`INSERT … ON CONFLICT DO NOTHING`); returns whether it did.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed.
    public func create(key: String, data: Data) throws -> Bool {
        try !query(statements.create, upsertParameters(key, data), reading: false, key: key).isEmpty
    }

    /// Removes the row of `key`, and notifies the change when there was one.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed.
    public func remove(key: String) throws {
        _ = try query(statements.remove, removalParameters(key), reading: false, key: key)
    }

    /// Removes the row of `key` only while it holds `data`, in one statement; returns whether it did.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed.
    public func remove(key: String, ifItHolds data: Data) throws -> Bool {
        return try !query(statements.removeIfHolds, removalParameters(key, data), reading: false, key: key).isEmpty
    }

    /// Stores `data` under `key` only while its row holds `expected` (`nil`: while there is no row), in one statement;
    /// returns whether it did. ``WLStorage/update(_:)`` uses it only when the table cannot keep tags.
    ///
    /// The statement records a random tag in `<table>_writes`; when its answer is lost, the store claims the tag:
    /// taking it means the write was not made and no longer can be; finding it taken means it was made.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed, or it is not known whether
    ///   it ran (the server stayed away past the timeout, or the role cannot record tags).
    public func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        try check([key], reading: false)
        let tag = UUID().uuidString
        let started = ContinuousClock.now
        var sent = false
        var recorded = false
        var node = 0
        let result = execute(reading: false, resending: false) { connection, deadline throws(PostgresError) in
            sent = true
            recorded = recordsWrites.load(ordering: .relaxed)
            node = writesNode.load(ordering: .relaxed)
            let (sql, parameters): (String, [PostgresConnection.Parameter]) =
                switch (expected, recorded) {
                case (let expected?, true): (statements.recordedReplaceIfHolds, [.bytes(expected), .text(tag)])
                case (let expected?, false): (statements.replaceIfHolds, [.bytes(expected)])
                case (nil, true): (statements.recordedCreate, [.text(tag)])
                case (nil, false): (statements.create, [])
                }
            return try connection.query(sql, upsertParameters(key, data) + parameters, deadline: deadline)
        }
        switch result {
        case .success(let rows):
            if recorded { countRecordedWrite() }
            return !rows.isEmpty
        case .failure(let error):
            guard sent, recorded, !Self.refusesStatement(error) else { throw failure(error, reading: false, key: key) }
            let claim = try query(
                statements.claimTag, [.text(tag), .text(String(node))], reading: false, key: key, patient: true)
            guard let written = claim.first?.first.flatMap({ $0 }) else { throw emptiedTags(key) }
            // A tag older than an hour may have been removed: a claim so late that takes it tells nothing.
            guard written == Data("true".utf8) || ContinuousClock.now - started < .seconds(3_000) else {
                throw failure(error, reading: false, key: key)
            }
            return written == Data("true".utf8)
        }
    }

    /// Removes old tags at the first recorded write and every 1,000th (a lost answer's tag is claimed within its call).
    func countRecordedWrite() {
        if recordedWrites.add(1, ordering: .relaxed).oldValue % 1_000 == 0 {
            _ = try? query(statements.pruneTags, [], reading: false, key: nil)
        }
    }

    /// Every key of the store's namespace, sorted.
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when the statement failed.
    public func keys() throws -> [String] {
        try query(statements.keys, [.text(namespace)], reading: true, key: nil).compactMap { row in
            row.first.flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// One row of the namespace, as the `wlstorage` tool lists it.
    package struct Row: Sendable {
        package var key: String
        /// The size of the stored bytes.
        package var size: Int
        /// When the row was written last, ISO 8601 in UTC.
        package var written: String
        /// The bytes, or `nil` when they are larger than the largest value read.
        package var value: Data?
    }

    /// Every row of the namespace, sorted by key.
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when the statement failed.
    package func rows() throws -> [Row] {
        let limit = WLStorageSystem.maximumStoredValueSize
        let rows = try query(statements.list, [.text(namespace), .text(String(limit))], reading: true, key: nil)
        return rows.compactMap { row in
            guard row.count == 4, let key = row[0], let size = row[1], let written = row[2] else { return nil }
            return Row(
                key: String(decoding: key, as: UTF8.self), size: Int(String(decoding: size, as: UTF8.self)) ?? 0,
                written: String(decoding: written, as: UTF8.self), value: row[3])
        }
    }

    /// Starts listening for changes of the namespace made through other connections (not the store's own writes, told
    /// by its writing connection's server process, unless heard after that connection was replaced).
    ///
    /// Once it listens, and after each reconnection, the feed reports ``WLStorageStoreChange/everything``; `changed` is
    /// called on the listener's queue, one at a time.
    public func observeChanges(
        _ changed: @escaping @Sendable (WLStorageStoreChange) -> Void
    ) -> WLStorageSubscription? {
        observeCarriedChanges { event in
            switch event {
            case .change(let change): changed(change)
            case .carried(let change): changed(.key(change.key))
            }
        }
    }
}
