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
    private let settings: PostgresSettings
    private let statements: Statements
    /// The connection for reads and writes. Its lock serializes the store's statements, and is held for the time of
    /// one call (at most a connection and a statement, each bounded by the timeout).
    private let writer: Lock<PostgresConnection>
    /// The server process of the writing connection, read by the listener to tell the store's own notifications.
    private let writerPID = BackendPID()
    /// Why the table cannot keep the tags of updates' writes (it lacks `recent_tags`, and the role may not add it), as
    /// found by the last connection; `nil` when it can, or before the first connection.
    private let tagging = Lock<WLStorageError?>(nil)
    private let listener: PostgresListener
    /// Whether a replica takes the value a notification carries without reading the row (see the initializer).
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
    ///   - adoptsNotifiedValues: Whether a replica takes the value a notification carries without reading the row.
    ///     `false` by default: every notification makes a replica read the row. PostgreSQL lets every role that can
    ///     connect to the database send a notification on any channel, without any privilege on the table; with this
    ///     on, such a role can make replicas hold a value that is not in the table, or skip the write that follows. Turn
    ///     it on only when every role that can connect to the database may also write the table: a replica then hears
    ///     a change without a read, and the server's work per write does not grow with the number of replicas (see the
    ///     article on sharing values across machines). The first store of an identity that a process follows decides it for
    ///     that process.
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
        self.writer = Lock(PostgresConnection(settings: settings))
        let pid = writerPID
        self.listener = PostgresListener(
            settings: settings, channel: statements.channel, table: statements.quotedName, namespace: namespace,
            timeout: timeout,
            identity: identity, ownPID: { pid.value })
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
        let limit = ValueSizeLimit.sealedMaximum
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

    /// The most tags of updates' writes a row keeps (`recent_tags`).
    ///
    /// A replica whose answer was lost asks about its tag after it has reconnected: three replicas incrementing one
    /// key while their connections were cut every 0.1 s wrote up to 88 times meanwhile on a loaded machine.
    static let keptTags = 256

    /// The bytes of `key` and their version, read as ``read(key:)`` reads; ``VersionedRead/untagged(_:)`` when the
    /// table cannot keep tags.
    package func readVersioned(key: String) throws -> VersionedRead {
        let found = try readWithVersion(key: key)
        if let missing = tagging.withLock({ $0 }) { return .untagged(missing) }
        guard let found else { return .absent }
        return .found(found.data, version: found.version)
    }

    /// The bytes of `key` and their version, read as ``read(key:)`` reads; `nil` when there is no row.
    package func readWithVersion(key: String) throws -> (data: Data, version: Int64)? {
        let limit = ValueSizeLimit.sealedMaximum
        let rows = try run(reading: true, key: key) { connection, deadline throws(PostgresError) in
            try connection.query(
                statements.readVersioned, [.text(namespace), .text(key), .text(String(limit))], deadline: deadline)
        }
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
    /// statement that puts `tag` first among the row's tags (`(ARRAY[tag] || recent_tags)[1:256]`), and notifies the
    /// change when it wrote.
    ///
    /// Like ``write(key:data:ifItHolds:)``, a statement whose connection is lost is not sent again here: the update
    /// sends it again itself, and asks the row about its tag (``trace(of:key:)``).
    package func write(key: String, data: Data, ifVersion version: Int64?, tag: WriteTag) throws -> TaggedWriteResult {
        try check([key], reading: false)
        var sent = false
        let result = execute(reading: false, resending: false) { connection, deadline throws(PostgresError) in
            sent = true
            if let version {
                return try connection.query(
                    statements.replaceIfVersion,
                    upsertParameters(key, data) + [.text(tag.text), .text(String(version))], deadline: deadline)
            }
            return try connection.query(
                statements.createTagged, upsertParameters(key, data) + [.text(tag.text)], deadline: deadline)
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

    /// Whether `error` is the server's refusal of a statement, which then committed nothing: an error of the data, a
    /// constraint, the SQL or its privileges, or a program limit; not an error that ends the connection or the server
    /// (classes 08, 57), which can come after a commit.
    static func refusesStatement(_ error: PostgresError) -> Bool {
        guard error.kind == .queryFailed, let state = error.sqlState else { return false }
        return ["22", "23", "42", "54"].contains(String(state.prefix(2)))
    }

    /// The row of `key`: its version, whether `tag` is among the tags it keeps, and how many it keeps; `nil` when there
    /// is no row.
    package func trace(of tag: WriteTag, key: String) throws -> TagTrace? {
        let rows = try run(reading: true, key: key) { connection, deadline throws(PostgresError) in
            try connection.query(statements.trace, [.text(namespace), .text(key), .text(tag.text)], deadline: deadline)
        }
        guard let row = rows.first else { return nil }
        let texts = row.map { $0.map { String(decoding: $0, as: UTF8.self) } }
        guard texts.count == 3, let version = texts[0].flatMap({ Int64($0) }), let kept = texts[2].flatMap({ Int($0) })
        else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): the row of the key has no version or tags", key: key,
                path: identity)
        }
        return TagTrace(version: version, tagFound: texts[1] == "true", tagsKept: kept, capacity: Self.keptTags)
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
        let limit = ValueSizeLimit.sealedMaximum
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

    // MARK: - Statements

    private func upsertParameters(_ key: String, _ data: Data) -> [PostgresConnection.Parameter] {
        [
            .text(namespace), .text(key), .bytes(data), .text(statements.channel),
            .text(Self.payload(namespace: namespace, key: key)),
        ]
    }

    /// Runs `body` on the writing connection, connected (and the table created) first when needed, and throws its
    /// failure as a ``WLStorageError`` (see ``execute(reading:key:checking:resending:_:)``).
    private func run(
        reading: Bool, key: String?, checking keys: [String] = [], resending: Bool = true,
        _ body: (PostgresConnection, ContinuousClock.Instant) throws(PostgresError) -> [[Data?]]
    ) throws(WLStorageError) -> [[Data?]] {
        try check((key.map { [$0] } ?? []) + keys, reading: reading)
        switch execute(reading: reading, resending: resending, body) {
        case .success(let rows): return rows
        case .failure(let error): throw failure(error, reading: reading, key: key)
        }
    }

    /// Throws when one of `keys` cannot be stored: PostgreSQL's `text` holds no NUL character.
    private func check(_ keys: [String], reading: Bool) throws(WLStorageError) {
        for checked in keys where checked.utf8.contains(0) {
            throw WLStorageError(
                code: reading ? .readFailed : .writeFailed,
                message: "\(identity): a PostgreSQL store cannot hold a key with a NUL character", key: checked,
                path: identity)
        }
    }

    /// Runs `body` on the writing connection, connected (and the table created) first when needed.
    ///
    /// A connection lost before `body` ran (while connecting, or while the table was checked: a server that ends
    /// connections) is made again, as is one lost under a read, while the deadline allows, a few times. A write that
    /// fails because an idle connection was lost meanwhile (the server restarted) is run once more on a new one,
    /// unless `resending` is off.
    private func execute(
        reading: Bool, resending: Bool,
        _ body: (PostgresConnection, ContinuousClock.Instant) throws(PostgresError) -> [[Data?]]
    ) -> Result<[[Data?]], PostgresError> {
        // The deadline counts from the call, not from taking the lock: a call queued behind others that each spend
        // their timeout (a server that does not answer) must not wait for all of them.
        let deadline = ContinuousClock.now + timeout
        return writer.withLock { connection -> Result<[[Data?]], PostgresError> in
            guard ContinuousClock.now < deadline else {
                return .failure(PostgresError(.timedOut, "timed out waiting for the store's other calls to end"))
            }
            var retried = false
            var reconnections = 0
            while true {
                let reused = connection.isConnected
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
                    if !connection.isConnected { writerPID.value = nil }
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
                    // The table was dropped by someone else: a new connection creates it again.
                    if !retried, error.sqlState == "42P01" {
                        retried = true
                        connection.disconnect()
                        writerPID.value = nil
                        continue
                    }
                    return .failure(error)
                }
            }
        }
    }

    /// `error` as the store's error for a call with `key`.
    private func failure(_ error: PostgresError, reading: Bool, key: String?) -> WLStorageError {
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

    /// Creates the table when it does not exist, and adds `recent_tags` to one made without it. Whether it exists is
    /// asked first (`to_regclass`), so that a role without `CREATE` on the schema uses a table made for it: `CREATE
    /// TABLE IF NOT EXISTS` needs that privilege even when the table exists.
    private func prepareTable(_ connection: PostgresConnection, deadline: ContinuousClock.Instant) throws(PostgresError)
    {
        do {
            if let table = try connection.query(statements.tableState, deadline: deadline).first {
                if table.first.flatMap({ $0 }) != nil {
                    tagging.withLock { $0 = nil }
                } else {
                    try addTagsColumn(connection, deadline: deadline)
                }
                return
            }
            do {
                _ = try connection.query(statements.createTable, deadline: deadline)
            } catch  where error.kind == .queryFailed && Self.concurrentCreation.contains(error.sqlState ?? "") {
                // Two connections created the table at once; the other one won.
                _ = try connection.query(statements.createTable, deadline: deadline)
            }
            tagging.withLock { $0 = nil }
        } catch {
            connection.disconnect()
            throw error
        }
    }

    /// Adds `recent_tags` to a table made without it (by an earlier version, or by a DBA). That needs the table's
    /// owner, and a lock that waits for every transaction using the table: it waits a second at most. When it cannot,
    /// the store's updates compare bytes, and say what to run; the next connection tries again.
    private func addTagsColumn(_ connection: PostgresConnection, deadline: ContinuousClock.Instant)
        throws(PostgresError)
    {
        do {
            _ = try connection.query("SET lock_timeout = 1000", deadline: deadline)
            defer { _ = try? connection.query("RESET lock_timeout", deadline: deadline) }
            _ = try connection.query(statements.addTagsColumn, deadline: deadline)
            tagging.withLock { $0 = nil }
        } catch  where error.kind == .queryFailed {
            // Added by another connection meanwhile, perhaps.
            if try connection.query(statements.tableState, deadline: deadline).first?.first.flatMap({ $0 }) != nil {
                tagging.withLock { $0 = nil }
                return
            }
            let missing = WLStorageError(
                code: .invalidConfiguration,
                message: "\(identity): the table lacks the column recent_tags, in which updates tag their writes, and"
                    + " the store could not add it (\(error.message)); updates compare bytes instead, and a"
                    + " replica's update whose answer is lost can then be taken for another's, or made twice. Have the"
                    + " table's owner run: \(statements.addTagsColumn)",
                path: identity, underlying: error)
            tagging.withLock { $0 = missing }
        }
    }

    /// What a creation of the table can fail with when another connection creates it at the same moment: a unique
    /// violation in the catalog (23505), the table (42P07) or its row type (42710) already there.
    static let concurrentCreation: Set<String> = ["23505", "42P07", "42710"]

    /// The SQL of the store's statements, with its table's name quoted.
    private struct Statements: Sendable {
        let channel: String
        /// The table's name, quoted: `"name"` or `"schema"."name"`.
        let quotedName: String
        let tableState: String
        let createTable: String
        let addTagsColumn: String
        let read: String
        let readVersioned: String
        let replaceIfVersion: String
        let createTagged: String
        let trace: String
        let keys: String
        let list: String
        let upsert: String
        let upsertMany: String
        let create: String
        let remove: String
        let removeIfHolds: String
        let replaceIfHolds: String

        /// The payload of a write's notification: `prefix` (``WLStoragePostgresStore/payload(namespace:key:)``), the
        /// row's new `version`, `.` and the OID of the table `name` (so that a store of a table of the same name in
        /// another schema, which shares the channel, does not take the bytes for its own), and `:` with the bytes
        /// `value` in Base64 when the whole fits in ``WLStoragePostgresStore/payloadLimit`` bytes (34 bytes are kept
        /// for the version, the OID and the separators).
        static func carried(prefix: String, version: String, value: String, name: String) -> String {
            """
            \(prefix) || \(version)::text || '.' || '\(name)'::regclass::oid::text || CASE WHEN octet_length(\(prefix)) \
            + 34 + 4 * ((octet_length(\(value)) + 2) / 3) <= \(WLStoragePostgresStore.payloadLimit) \
            THEN ':' || translate(encode(\(value), 'base64'), chr(10), '') ELSE '' END
            """
        }

        init(table: String) {
            let name = table.split(separator: ".").map { "\"\($0)\"" }.joined(separator: ".")
            let notifyWrite =
                "pg_notify($4, \(Self.carried(prefix: "$5", version: "written.version", value: "$3", name: name)))"
            quotedName = name
            channel = table.replacingOccurrences(of: ".", with: "_") + "_changes"
            // The name as a literal of its quoted form: `to_regclass('"schema"."name"')`. A row when the table exists,
            // whose column is not NULL when the table has `recent_tags`.
            tableState = """
                SELECT (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('\(name)') \
                AND attname = 'recent_tags' AND NOT attisdropped) WHERE to_regclass('\(name)') IS NOT NULL
                """
            createTable = """
                CREATE TABLE IF NOT EXISTS \(name) (namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, \
                version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), \
                recent_tags text[] NOT NULL DEFAULT '{}', PRIMARY KEY (namespace, key))
                """
            addTagsColumn = "ALTER TABLE \(name) ADD COLUMN IF NOT EXISTS recent_tags text[] NOT NULL DEFAULT '{}'"
            // The bytes only when they are not too large ($3), and their size.
            read = """
                SELECT CASE WHEN octet_length(value) <= $3::bigint THEN value END, octet_length(value)::text \
                FROM \(name) WHERE namespace = $1 AND key = $2
                """
            readVersioned = """
                SELECT CASE WHEN octet_length(value) <= $3::bigint THEN value END, octet_length(value)::text, \
                version::text FROM \(name) WHERE namespace = $1 AND key = $2
                """
            keys = "SELECT key FROM \(name) WHERE namespace = $1 ORDER BY key"
            // Each row's key, size, time of its last write (UTC, to the second) and bytes when not too large ($2).
            list = """
                SELECT key, octet_length(value)::text, \
                to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), \
                CASE WHEN octet_length(value) <= $2::bigint THEN value END \
                FROM \(name) WHERE namespace = $1 ORDER BY key
                """
            let insert = "INSERT INTO \(name) AS stored (namespace, key, value, version) VALUES ($1, $2, $3, 1)"
            upsert = """
                WITH written AS (\(insert) ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, \
                version = stored.version + 1, updated_at = now() RETURNING stored.version) SELECT \(notifyWrite) \
                FROM written
                """
            // The rows of a chunk of a batch, written as `upsert` writes one: the same version and notification.
            upsertMany = """
                WITH input AS (SELECT * FROM unnest($2::text[], $3::bytea[], $5::text[]) \
                AS input(key, value, payload)), written AS (INSERT INTO \(name) AS stored (namespace, key, value, version) \
                SELECT $1, input.key, input.value, 1 FROM input ON CONFLICT (namespace, key) DO UPDATE \
                SET value = EXCLUDED.value, version = stored.version + 1, updated_at = now() \
                RETURNING stored.key, stored.version) SELECT pg_notify($4, \
                \(Self.carried(prefix: "input.payload", version: "written.version", value: "input.value", name: name))) \
                FROM written JOIN input ON input.key = written.key
                """
            create = """
                WITH written AS (\(insert) ON CONFLICT (namespace, key) DO NOTHING RETURNING stored.version) \
                SELECT \(notifyWrite) FROM written
                """
            remove = """
                WITH removed AS (DELETE FROM \(name) WHERE namespace = $1 AND key = $2 RETURNING 1) \
                SELECT pg_notify($3, $4) FROM removed
                """
            removeIfHolds = """
                WITH removed AS (DELETE FROM \(name) WHERE namespace = $1 AND key = $2 AND value = $3 RETURNING 1) \
                SELECT pg_notify($4, $5) FROM removed
                """
            // An update's write: on condition of the version read ($7), tagged ($6), the tag first among the last
            // ones the row keeps.
            let tags = "(ARRAY[$6::text] || stored.recent_tags)[1:\(WLStoragePostgresStore.keptTags)]"
            replaceIfVersion = """
                WITH written AS (UPDATE \(name) AS stored SET value = $3, version = stored.version + 1, \
                updated_at = now(), recent_tags = \(tags) \
                WHERE namespace = $1 AND key = $2 AND version = $7::bigint RETURNING stored.version) \
                SELECT \(notifyWrite) FROM written
                """
            createTagged = """
                WITH written AS (INSERT INTO \(name) (namespace, key, value, version, recent_tags) \
                VALUES ($1, $2, $3, 1, ARRAY[$6::text]) ON CONFLICT (namespace, key) DO NOTHING \
                RETURNING version) SELECT \(notifyWrite) FROM written
                """
            trace = """
                SELECT version::text, ($3::text = ANY(recent_tags))::text, cardinality(recent_tags)::text \
                FROM \(name) WHERE namespace = $1 AND key = $2
                """
            replaceIfHolds = """
                WITH written AS (UPDATE \(name) SET value = $3, version = version + 1, updated_at = now() \
                WHERE namespace = $1 AND key = $2 AND value = $6 RETURNING version) SELECT \(notifyWrite) \
                FROM written
                """
        }
    }

    /// A table name the store accepts: `name` or `schema.name`, each part `[A-Za-z_][A-Za-z0-9_]*`, at most 48 bytes
    /// (so that the channel, `<table>_changes`, stays within PostgreSQL's 63 bytes).
    static func isValidTable(_ table: String) -> Bool {
        let parts = table.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), table.utf8.count <= 48 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
                return false
            }
            return part.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
            }
        }
    }

    // MARK: - Notification payloads

    /// The most bytes of a payload; PostgreSQL refuses 8,000 or more.
    static let payloadLimit = 7_900

    /// The start of the payload that announces a write of `key` in `namespace`, to which the statement adds the row's
    /// new version and, when the whole fits in ``payloadLimit``, the bytes written:
    /// `*:<bytes of namespace>:<namespace>c<bytes of key>:<key><version>.<table OID>[:<Base64 of the bytes>]`. When the
    /// key is too
    /// long for that, `*:<bytes of namespace>:<namespace>` alone, a change of every key of the namespace (what the
    /// statement adds is then ignored).
    ///
    /// The payload starts as a change of every key of the namespace, which is what a program of an earlier version,
    /// which knows only `k:` and `*:` payloads, takes it for: during a rolling deploy, such a program reads all its keys
    /// at each write, and misses nothing. The bytes are the row's as stored: a value of an encrypted store over this
    /// one is sealed, and travels sealed.
    static func payload(namespace: String, key: String) -> String {
        let prefix = "*:\(namespace.utf8.count):\(namespace)"
        let payload = prefix + "c\(key.utf8.count):" + key
        // The statement adds up to 34 bytes of version, table OID and separators.
        return payload.utf8.count + 34 <= payloadLimit ? payload : prefix
    }

    /// The payload that announces the removal of `key` in `namespace`: `k:<bytes of namespace>:<namespace><key>`, a
    /// change that the storages of the key read; or, when that is too long, `*:<bytes of namespace>:<namespace>`.
    static func removalPayload(namespace: String, key: String) -> String {
        let prefix = "\(namespace.utf8.count):\(namespace)"
        let payload = "k:" + prefix + key
        return payload.utf8.count <= payloadLimit ? payload : "*:" + prefix
    }

    /// The change a payload announces for `namespace`, or `nil` when it is about another namespace or is not one of
    /// the store's payloads. A write's payload whose version or bytes do not read as such, or that names another table
    /// than `table` (the OID of the store's table, as text; `nil` when unknown), is a change of its key, to read;
    /// what follows the namespace in a `*:` payload other than a carried change is ignored.
    static func change(fromPayload payload: String, namespace: String, table: String?) -> StoreFeedEvent? {
        let bytes = Array(payload.utf8)
        let kind = bytes.first
        guard bytes.count >= 4, kind == UInt8(ascii: "k") || kind == UInt8(ascii: "*"), bytes[1] == UInt8(ascii: ":"),
            let (namespaceRange, rest) = lengthPrefixed(bytes, from: 2),
            bytes[namespaceRange].elementsEqual(namespace.utf8)
        else { return nil }
        if kind == UInt8(ascii: "k") { return .change(.key(String(decoding: bytes[rest...], as: UTF8.self))) }
        guard rest < bytes.count, bytes[rest] == UInt8(ascii: "c"),
            let (keyRange, carriedStart) = lengthPrefixed(bytes, from: rest + 1)
        else { return .change(.everything) }
        let key = String(decoding: bytes[keyRange], as: UTF8.self)
        let colon = bytes[carriedStart...].firstIndex(of: UInt8(ascii: ":")) ?? bytes.count
        let stamp = String(decoding: bytes[carriedStart..<colon], as: UTF8.self).split(separator: ".")
        guard stamp.count == 2, let version = Int64(stamp[0]), version > 0, let table, stamp[1] == table else {
            return .change(.key(key))
        }
        guard colon < bytes.count else { return .carried(CarriedChange(key: key, version: version, data: nil)) }
        guard let data = Data(base64Encoded: Data(bytes[(colon + 1)...])) else { return .change(.key(key)) }
        return .carried(CarriedChange(key: key, version: version, data: data))
    }

    /// The range of the bytes of `<length>:<bytes>` starting at `start` in `bytes`, and where what follows starts.
    private static func lengthPrefixed(_ bytes: [UInt8], from start: Int) -> (Range<Int>, Int)? {
        guard start < bytes.count, let colon = bytes[start...].firstIndex(of: UInt8(ascii: ":")),
            colon > start, colon - start <= 6,
            let length = Int(String(decoding: bytes[start..<colon], as: UTF8.self)),
            length >= 0, length <= bytes.count - colon - 1
        else { return nil }
        return (colon + 1..<colon + 1 + length, colon + 1 + length)
    }
}

/// The server process of a store's writing connection, shared with its listener.
/// The server process of the writing connection: an atomic word, not a lock (0 for none: no server process has it), so
/// that the listener reads it while the writer's lock is held for a call.
private final class BackendPID: Sendable {
    private let pid = Atomic<Int32>(0)

    var value: Int32? {
        get {
            let pid = pid.load(ordering: .acquiring)
            return pid == 0 ? nil : pid
        }
        set { pid.store(newValue ?? 0, ordering: .releasing) }
    }
}

/// The store's updates write on condition of the row's version, tagged (see ``VersionedConditionalStore``).
extension WLStoragePostgresStore: VersionedConditionalStore {}

/// Every write's notification carries the row's new version, and its bytes when they fit: a replica that knows the
/// version before adopts them without reading the row (see ``CarriedChange``).
extension WLStoragePostgresStore: CarriesChanges, CarriedChangeFeed {
    package var carriedChangeFeed: (any CarriedChangeFeed)? { self }

    /// The feed of ``observeChanges(_:)``, with what the notifications carry.
    package func observeCarriedChanges(_ changed: @escaping @Sendable (StoreFeedEvent) -> Void)
        -> WLStorageSubscription?
    {
        let listener = self.listener
        let id: UInt64
        if adoptsNotifiedValues {
            id = listener.add(changed)
        } else {
            // A notification's bytes and version are not trusted: any role that can connect may send one. The key it
            // names is read.
            id = listener.add { event in
                if case .carried(let change) = event {
                    changed(.change(.key(change.key)))
                } else {
                    changed(event)
                }
            }
        }
        return WLStorageSubscription { listener.remove(id) }
    }

    /// Carried bytes are the row's bytes.
    package func opened(_ carried: Data, key: String) throws -> Data { carried }
}
