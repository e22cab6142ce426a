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
/// The table is created when the store first connects, if it does not exist (`to_regclass` says whether it does, so
/// that a role without `CREATE` on the schema uses a table made for it):
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS wlstorage (
///     namespace text, key text, value bytea NOT NULL, version bigint NOT NULL,
///     updated_at timestamptz NOT NULL DEFAULT now(), recent_tags text[] NOT NULL DEFAULT '{}',
///     PRIMARY KEY (namespace, key))
/// ```
///
/// Every write adds one to the row's `version`. ``WLStorage/update(_:)`` writes on condition of the version it read,
/// and tags its write with a random tag, which the row keeps among the tags of its last 256 such writes
/// (`recent_tags`): when the answer to the write is lost, the tag tells whether it committed, so that an update is
/// made exactly once whatever other replicas write. A table made before lacks `recent_tags`; the store adds it
/// (`ALTER TABLE … ADD COLUMN IF NOT EXISTS`, which needs the table's owner), and when its role may not, its updates
/// compare bytes, as they did before, and the first one of each storage reports the statement to run.
///
/// Every write, creation and removal notifies the channel `<table>_changes` in the same statement (a batch, at its
/// commit), with the namespace and the key; a key too long for a notification is announced as a change of every key of
/// the namespace. A write's notification also carries the row's new version, and the bytes written when they fit (up
/// to about 5,800 bytes): a replica that knows the version just before takes them without reading the row, and reads
/// it whenever it cannot trust what came (a gap in versions, a value too large, a reconnection).
///
/// The store connects when it is first used, not when it is created: a server that is down does not stop a program
/// from starting. Until it is back, reads and writes throw, and storages keep their values pending and retry. The
/// store uses two connections: one for reads and writes, one that listens, which reconnects by itself with a backoff
/// and then reports ``WLStorageStoreChange/everything``.
///
/// Every wait (connecting, a statement) ends after the store's timeout: a statement that takes longer is cancelled,
/// its connection dropped, and the call throws.
///
/// - Important: Keys must not contain the NUL character, which PostgreSQL's `text` cannot hold. A key's index entry
///   must fit in a B-tree page after compression (about 2,700 bytes): the server refuses longer keys whose bytes do not
///   compress, and the write throws.
public final class WLStoragePostgresStore: WLStorageConditionalStore, CustomStringConvertible {
    /// `postgresql://host:port/dbname?table=<table>#<namespace>`: the server, database, table and namespace, never the
    /// user's password. For a table named without its schema, the search path the connection sets (in `options` or
    /// `PGOPTIONS`) follows the table (`&search_path=staging`), so that stores of two schemas are two stores.
    public let identity: String
    /// The namespace the store's keys live in: stores with different namespaces in one table hold different values.
    public let namespace: String
    /// The table that holds the values.
    public let table: String
    /// How long any wait of the store lasts at most: connecting, or running a statement.
    public let timeout: Duration

    // Locks, in the order they may be taken: `writer` (the writing connection, held for one call: a connection and a
    // statement, each bounded by the timeout), then `tagging`, a leaf. `writerPID` is an atomic word, not a lock. The
    // listener's lock (see PostgresListener) is never taken with any; feed handlers run outside all.
    let settings: PostgresSettings
    let statements: Statements
    /// The connection for reads and writes. Its lock serializes the store's statements, and is held for the time of
    /// one call (at most a connection and a statement, each bounded by the timeout).
    let writer: Locked<PostgresConnection>
    /// The server process of the writing connection, read by the listener to tell the store's own notifications.
    let writerPID = BackendPID()
    /// Why the table cannot keep the tags of updates' writes (it lacks `recent_tags`, and the role may not add it), as
    /// found by the last connection; `nil` when it can, or before the first connection.
    let tagging = Locked<WLStorageError?>(nil)
    let listener: PostgresListener
    /// Whether a replica takes the value a notification carries from every sender, not only from the roles that may
    /// update the table (see the initializer).
    public let adoptsNotifiedValues: Bool

    /// Creates a store of the values of `namespace` in `table` of the database at `url`. It does not connect yet.
    ///
    /// - Parameters:
    ///   - url: A libpq connection string: a `postgresql://` URI, or `key=value` pairs (`host=/run/db port=5432`).
    ///     Libpq's environment variables (`PGHOST`, `PGPASSWORD`, …) and password file apply as usual. Over a network,
    ///     set `sslmode=verify-full`: libpq's default, `prefer`, checks no certificate and falls back to plain text.
    ///   - namespace: The namespace of the keys: lets several programs or environments share one table.
    ///     Any text of 1 to 1,000 bytes without NUL.
    ///   - table: The table's name, `name` or `schema.name`, each part an unquoted SQL identifier (letters, digits and
    ///     underscores, not starting with a digit) of at most 48 bytes.
    ///   - timeout: How long to wait at most to connect, or for a statement to complete.
    ///   - adoptsNotifiedValues: Whether a replica takes the value a notification carries from every sender. PostgreSQL
    ///     lets every role that can connect to the database send a notification on any channel, without any privilege
    ///     on the table, and tells which server process sent it. `false` by default: a replica takes the value only from
    ///     a process whose role may update the table (learnt once per process), and reads the row for any other
    ///     notification. With this on, any role that can connect can make replicas hold a value that is not in the
    ///     table, or skip the write that follows; turn it on only when every role that can connect may also write the
    ///     table, to save the statement that learns a new process's role (see the article on sharing values across
    ///     machines). The first store of an identity that a process follows decides it for that process.
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
            timeout: timeout,
            identity: identity, trustsEveryRole: adoptsNotifiedValues, ownPID: { pid.value })
    }

    deinit {
        writer.withLock { $0.close() }
    }

    /// `WLStoragePostgresStore(<identity>)`.
    public var description: String { "WLStoragePostgresStore(\(identity))" }

    /// Why the store's change feed cannot hear other programs' changes now, or `nil` while it listens (or while no
    /// storage follows the store).
    ///
    /// The feed listens on a connection of its own, which it probes with a round trip every two seconds: a
    /// connection that breaks, or stops answering without a word (a middlebox that dropped the flow), is found out
    /// within seconds, and made again, and then every storage reads its key again. While the feed cannot listen (the
    /// server refuses the connection, say, for a role's connection limit), this is the error, which is also reported to
    /// ``WLStorageSystem/errorHandler`` when it starts and once a minute while it lasts. A health check of a service can
    /// read it.
    public var changeFeedError: WLStorageError? { listener.trouble }

    // MARK: - WLStorageStore

    /// The bytes stored under `key` in the store's namespace, or `nil` when there is no row.
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when the server cannot be reached, does not answer
    ///   within the timeout, or refuses the statement.
    ///
    /// The row's size is checked by the server first (`octet_length`): bytes larger than ``WLStorageSystem/maximumValueSize``
    /// (and what encryption adds to a value) are not fetched, and the call throws
    /// ``WLStorageError/Code/valueTooLarge``.
    public func read(key: String) throws -> Data? {
        let limit = WLStorageSystem.maximumStoredValueSize
        let rows = try run(reading: true, key: key) { connection, deadline throws(PostgresError) in
            try connection.query(
                statements.read, [.text(namespace), .text(key), .text(String(limit))], deadline: deadline)
        }
        guard let row = rows.first, row.count == 2 else { return nil }
        if let value = row[0] { return value }
        let size = row[1].map { String(decoding: $0, as: UTF8.self) } ?? "?"
        throw WLStorageError(
            code: .valueTooLarge,
            message: "\(identity): the row of the key holds \(size) bytes, more than the largest value read"
                + " (\(limit) bytes, WLStorageSystem.maximumValueSize and what encryption adds); it is not read",
            key: key, path: identity)
    }

    /// Stores `data` under `key` (an upsert), and notifies the change.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when nothing was stored, or it is not known whether it
    ///   was (the connection broke, or the timeout passed).
    public func write(key: String, data: Data) throws {
        _ = try run(reading: false, key: key) { connection, deadline throws(PostgresError) in
            try connection.query(statements.upsert, upsertParameters(key, data), deadline: deadline)
        }
    }

    /// Stores `data` under `key` unless a row exists for it, in one statement (`INSERT … ON CONFLICT DO NOTHING`), and
    /// returns whether it did. Notifies the change when it did.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed.
    public func create(key: String, data: Data) throws -> Bool {
        let rows = try run(reading: false, key: key) { connection, deadline throws(PostgresError) in
            try connection.query(statements.create, upsertParameters(key, data), deadline: deadline)
        }
        return !rows.isEmpty
    }

    /// Removes the row of `key`, and notifies the change when there was one.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed.
    public func remove(key: String) throws {
        _ = try run(reading: false, key: key) { connection, deadline throws(PostgresError) in
            let payload = Self.removalPayload(namespace: namespace, key: key)
            return try connection.query(
                statements.remove, [.text(namespace), .text(key), .text(statements.channel), .text(payload)],
                deadline: deadline)
        }
    }

    /// Removes the row of `key` only while it holds `data`, in one statement, and returns whether it did. Notifies the
    /// change when it did.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed.
    public func remove(key: String, ifItHolds data: Data) throws -> Bool {
        let rows = try run(reading: false, key: key) { connection, deadline throws(PostgresError) in
            let payload = Self.removalPayload(namespace: namespace, key: key)
            return try connection.query(
                statements.removeIfHolds,
                [.text(namespace), .text(key), .bytes(data), .text(statements.channel), .text(payload)],
                deadline: deadline)
        }
        return !rows.isEmpty
    }

    /// Stores `data` under `key` only while its row holds `expected` (or, for `nil`, while there is no row), in one
    /// statement, and returns whether it did; notifies the change when it did. ``WLStorage/update(_:)`` writes on
    /// condition of the row's version instead, tagged (see the table above), and on this only when the table lacks
    /// `recent_tags` and the store may not add it.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the statement failed, or it is not known whether
    ///   it ran.
    ///
    /// A statement whose connection is lost is not sent again, unlike the others: it may have been committed, and a
    /// second one would find the new bytes and say it did not store them. The call throws instead, and the caller reads
    /// the key to learn the outcome.
    public func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        let rows = try run(reading: false, key: key, resending: false) { connection, deadline throws(PostgresError) in
            if let expected {
                try connection.query(
                    statements.replaceIfHolds, upsertParameters(key, data) + [.bytes(expected)], deadline: deadline)
            } else {
                try connection.query(statements.create, upsertParameters(key, data), deadline: deadline)
            }
        }
        return !rows.isEmpty
    }

    /// Every key of the store's namespace, sorted.
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when the statement failed.
    public func keys() throws -> [String] {
        let rows = try run(reading: true, key: nil) { connection, deadline throws(PostgresError) in
            try connection.query(statements.keys, [.text(namespace)], deadline: deadline)
        }
        return rows.compactMap { row in row.first.flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) } }
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
        let rows = try run(reading: true, key: nil) { connection, deadline throws(PostgresError) in
            try connection.query(statements.list, [.text(namespace), .text(String(limit))], deadline: deadline)
        }
        return rows.compactMap { row in
            guard row.count == 4, let key = row[0], let size = row[1], let written = row[2] else { return nil }
            return Row(
                key: String(decoding: key, as: UTF8.self), size: Int(String(decoding: size, as: UTF8.self)) ?? 0,
                written: String(decoding: written, as: UTF8.self), value: row[3])
        }
    }

    /// Starts listening for changes of the store's namespace made through other connections (other stores, programs,
    /// machines); the store's own writes are not reported.
    ///
    /// The feed tells the store's own writes by the server process of its writing connection. A write that the feed
    /// hears only once that connection was replaced is reported as a change of its key, which costs one read: a
    /// write whose answer was lost with its connection, and that was sent again on a new one, can have been committed
    /// by the first, and the number of a process that is no longer the store's may be another connection's by then,
    /// whose changes must not be dropped.
    ///
    /// The listening connection is made in the background. Once it listens, and again each time it has reconnected
    /// after losing the server, the feed reports ``WLStorageStoreChange/everything``. `changed` is called on the
    /// listener's queue, one change at a time.
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
