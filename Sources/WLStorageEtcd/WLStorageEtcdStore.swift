import Foundation
import Synchronization
import WLStorage

/// A store that keeps values in an etcd cluster (v3 API), one etcd key per namespace and key, and tells its storages
/// about changes made by other programs and machines through a watch.
///
/// ```swift
/// let store = try WLStorageEtcdStore(
///     endpoints: ["http://etcd-1:2379", "http://etcd-2:2379", "http://etcd-3:2379"], namespace: "settings")
/// @WLStorage(key: "theme", defaultValue: "dark", store: store) var theme: String
/// ```
///
/// A key is stored under the etcd key `wlstorage/<namespace>/<key>`, with the namespace's `%` and `/` written `%25`
/// and `%2F`: a key may contain any character, `/` included, and the keys of one namespace are never among another's.
/// The value is the bytes the storage writes (its JSON), as they are. Besides the values, every removal writes the
/// etcd key `wlstorage-removals/<escaped namespace>/<bucket>` (empty, one of 64 by a hash of the key removed), outside
/// that range: a write that may find nothing stored compares its revision, so that one delivered late does not put
/// back a key removed since.
///
/// The store talks to etcd's gRPC JSON gateway (`POST /v3/kv/range`, `/v3/kv/put`, `/v3/kv/deleterange`,
/// `/v3/kv/txn` and `/v3/watch`) over HTTP/1.1 with libcurl. It connects when it is first used, not when it is
/// created. A call that cannot reach an endpoint tries the next one, from the one that answered last; every call ends
/// within the store's timeout.
///
/// ``WLStorage/update(_:)`` is atomic across programs, and made exactly once across lost answers: the store is a
/// `WLStorageVersionedStore` whose version is the key's `mod_revision`; an update's write is one transaction that
/// compares it and records the write's tag beside the key (see ``write(key:data:ifVersion:tag:)``).
/// ``write(key:data:ifItHolds:)`` is one transaction that compares the key's bytes (or, where nothing should be stored,
/// its creation revision) before it writes; ``write(_:ifTheyHold:)``, a batch of such writes (the objects a flush of
/// every storage writes), one transaction for up to 127 keys.
///
/// What this store does not do yet: it has no TLS client certificates, no user and password (etcd's authentication),
/// and no lease on its keys.

public final class WLStorageEtcdStore: WLStorageConditionalStore, WLStorageCarryingStore, CustomStringConvertible {
    /// `etcd:<endpoints, sorted, separated by commas>#<namespace>`: two stores with the same endpoints and namespace
    /// are one store. The same cluster reached through endpoints written otherwise (`localhost` rather than
    /// `127.0.0.1`) is another store to the storages of a process.
    public let identity: String
    /// The namespace the store's keys live in.
    public let namespace: String
    /// The endpoints, as given.
    public let endpoints: [String]
    /// How long a call waits at most, for all the endpoints it tries.
    public let timeout: Duration

    let client: EtcdClient
    let health: EtcdFeedHealth
    /// The tags of updates' writes whose answer was lost, with the latest revision the store had seen when each was
    /// sent (see WLStorageEtcdStore+Versions.swift); the last ``lostAnswersKept`` of them.
    let lostAnswers = Mutex<[(tag: String, seen: Int64)]>([])
    /// `wlstorage/<escaped namespace>/`: the start of every etcd key of the store.
    let prefix: Data
    /// The end of the range of the store's keys: the prefix with its last byte (`/`) made `0`.
    let prefixEnd: Data

    /// The most operations in one transaction of a batch: etcd's default `--max-txn-ops`.
    static let transactionOperations = 128
    /// The bytes of keys and values past which a transaction of a batch ends (before Base64, which adds a third).
    static let transactionBytes = 1024 * 1024
    /// The most bytes of keys and values one request may hold: etcd refuses a request of more than
    /// `--max-request-bytes`, 1.5 MiB by default (1,572,864 bytes), less what its encoding adds.
    ///
    /// A larger request is not sent: etcd would refuse it.
    public static let maximumRequestBytes = 1_500_000

    /// Creates a store of the values of `namespace` in the etcd cluster at `endpoints`. It does not connect yet.
    ///
    /// - Parameters:
    ///   - endpoints: The client URLs of the cluster's members, `http://host:port` (or `https://`, checked against the
    ///     system's trusted certificates), without a path, user or password.
    ///   - namespace: The namespace of the keys: lets several programs or environments share one cluster. Any text of
    ///     1 to 1,000 bytes.
    ///   - timeout: How long a call waits at most, for all the endpoints it tries.
    /// - Throws: `WLStorageError.Code.invalidConfiguration` when there is no endpoint, an endpoint is not such a URL,
    ///   the namespace is empty or too long, or the timeout is not positive.
    public init(endpoints: [String], namespace: String = "default", timeout: Duration = .seconds(10))
        throws(WLStorageError)
    {
        guard !endpoints.isEmpty else {
            throw WLStorageError(code: .invalidConfiguration, message: "an etcd store needs at least one endpoint")
        }
        var urls: [URL] = []
        for endpoint in endpoints {
            urls.append(try Self.endpointURL(endpoint))
        }
        guard !namespace.isEmpty, namespace.utf8.count <= 1000 else {
            throw WLStorageError(code: .invalidConfiguration, message: "invalid namespace: it must be 1 to 1000 bytes")
        }
        guard timeout > .zero else {
            throw WLStorageError(code: .invalidConfiguration, message: "the timeout must be positive")
        }
        self.endpoints = endpoints
        self.namespace = namespace
        self.timeout = timeout
        let escaped = namespace.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
        self.prefix = Data("wlstorage/\(escaped)/".utf8)
        self.prefixEnd = Data("wlstorage/\(escaped)0".utf8)
        self.identity = "etcd:" + Set(urls.map(\.absoluteString)).sorted().joined(separator: ",") + "#" + escaped
        self.client = EtcdClient(endpoints: urls, timeout: timeout)
        self.health = EtcdFeedHealth(identity: identity)
    }

    /// Why the store's change feed cannot hear other programs' changes now, or `nil` while it watches (or while no
    /// storage follows the store).
    ///
    /// The feed's watch probes its endpoint with a linearizable read every five seconds (or every `timeout`, when it is
    /// shorter), which must answer within as long: a member that stops answering, or a network that stops carrying its
    /// answers, is found out within twice that. While the watch cannot be made or its endpoint does not answer, this is
    /// the error, which is also reported to ``WLStorageSystem/errorHandler`` when it starts and once a minute while it
    /// lasts; it is `nil` again once a watch is made. A health check of a service can read it.
    public var changeFeedError: WLStorageError? { health.trouble }

    /// `WLStorageEtcdStore(<identity>)`.
    public var description: String { "WLStorageEtcdStore(\(identity))" }

    /// The URL of an endpoint, `scheme://host[:port]`, or an error that quotes it without a user or password.
    private static func endpointURL(_ text: String) throws(WLStorageError) -> URL {
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        guard let components = URLComponents(string: trimmed), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
            components.user == nil, components.password == nil, components.path.isEmpty, components.query == nil,
            components.fragment == nil, let url = components.url
        else {
            // The text may hold a password where a user was given: only its scheme and host are quoted.
            let shown = URLComponents(string: text).map { "\($0.scheme ?? "?")://\($0.host ?? "?")" } ?? "it"
            throw WLStorageError(
                code: .invalidConfiguration,
                message: "invalid etcd endpoint (\(shown)): use http://host:port or https://host:port, without a path,"
                    + " user or password")
        }
        return url
    }

    // MARK: - Keys

    /// The etcd key of `key`.
    func etcdKey(_ key: String) -> Data {
        prefix + Data(key.utf8)
    }

    /// The key of an etcd key of the store, or `nil` when it is not one.
    func key(of etcdKey: Data) -> String? {
        guard etcdKey.starts(with: prefix) else { return nil }
        return String(decoding: etcdKey.dropFirst(prefix.count), as: UTF8.self)
    }

    // MARK: - WLStorageStore

    /// The bytes stored under `key`, or `nil` when nothing is (a linearizable read).
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when no endpoint answered within the timeout, or the
    ///   server refused the request.
    public func read(key: String) throws -> Data? {
        let answer: RangeResponse = try perform(reading: true, key: key) { () throws(EtcdFailure) in
            try client.call("v3/kv/range", RangeRequest(key: etcdKey(key)), resending: true)
        }
        guard let found = answer.kvs?.first else { return nil }
        return found.value ?? Data()
    }

    /// The bytes stored under `key` with the key's version (one more at every put; see
    /// ``WLStorageCarryingStore``), or `nil` when nothing is (a linearizable read).
    ///
    /// - Throws: As ``read(key:)``.
    public func readWithVersion(key: String) throws -> (data: Data, version: Int64)? {
        let answer: RangeResponse = try perform(reading: true, key: key) { () throws(EtcdFailure) in
            try client.call("v3/kv/range", RangeRequest(key: etcdKey(key)), resending: true)
        }
        guard let found = answer.kvs?.first else { return nil }
        guard let version = found.version.flatMap({ Int64($0) }) else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): etcd's answer holds the key without its version", key: key,
                path: identity)
        }
        return (found.value ?? Data(), version)
    }

    /// Stores `data` under `key` (a put), fenced: in a transaction that does nothing when the key was written after the
    /// latest revision of the cluster the store had seen, so that a put etcd receives late, after newer writes, does not
    /// take the key back; nor when a key of its bucket was removed since (each removal by the store writes the etcd
    /// key `wlstorage-removals/<escaped namespace>/<bucket>` too, the bucket one of 64 by a hash of the key), so that it
    /// does not put back a key removed since. When another program wrote the key, or removed a key of its bucket,
    /// meanwhile, it is sent again with the later revision, and at the fifth try without the fence.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when nothing was stored, or it is not known whether it
    ///   was.
    public func write(key: String, data: Data) throws {
        _ = try writeWithVersion(key: key, data: data)
    }

    /// Stores `data` under `key` as ``write(key:data:)`` does, and returns the key's version after the write, read in
    /// the same transaction; `nil` when the key counted once more, for that read, would take its key and bytes past
    /// ``maximumRequestBytes`` (the read is not sent: with a long key, etcd would refuse the request).
    ///
    /// - Throws: As ``write(key:data:)``.
    public func writeWithVersion(key: String, data: Data) throws -> Int64? {
        // The fence's mention of the key fits in the margin under etcd's limit; the read of the version mentions it once
        // more, counted.
        try checkSize(of: [key], [data], key: key)
        let etcdKey = etcdKey(key)
        var operations = [RequestOp(requestPut: PutRequest(key: etcdKey, value: data))]
        let readsVersion = (try? checkSize(of: [key, key], [data], key: key)) != nil
        if readsVersion { operations.append(RequestOp(requestRange: RangeRequest(key: etcdKey, keysOnly: true))) }
        let answer = try fenced(
            key: key, conditions: [], operations: operations, resending: true, fencingRemovals: true)
        guard readsVersion else { return nil }
        return answer?.responses?.last?.responseRange?.kvs?.first?.version.flatMap { Int64($0) }
    }

    /// Stores `data` under `key` unless something is stored there, in one transaction (the key's creation revision is
    /// 0), and returns whether it did.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the transaction failed, or it is not known whether
    ///   it was carried out.
    public func create(key: String, data: Data) throws -> Bool {
        try write(key: key, data: data, ifItHolds: nil)
    }

    /// Stores `data` under `key` only while it holds `expected` (for `nil`, while nothing is stored), in one
    /// transaction, and returns whether it did. It is fenced as ``write(key:data:)`` is: for `nil`, against removals of
    /// keys of its bucket since too (a key removed since holds nothing again).
    ///
    /// A transaction whose answer was lost is judged by the key's history (its fence makes it, if carried out, the
    /// key's first write after the revision it names); with no write since, it is sent again as it is, fence and all,
    /// at most once per endpoint: only one copy can be carried out.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the transaction failed, or it is not known whether
    ///   it was carried out.
    public func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        // The transaction names the key twice: in its comparison and in its put (and the fence's two more mentions fit in
        // the margin under etcd's limit).
        try checkSize(of: [key, key], [data, expected ?? Data()], key: key)
        let etcdKey = etcdKey(key)
        let condition =
            if let expected {
                Compare(target: "VALUE", key: etcdKey, value: expected)
            } else {
                Compare(target: "CREATE", key: etcdKey, createRevision: "0")
            }
        return try fenced(
            key: key, conditions: [condition],
            operations: [RequestOp(requestPut: PutRequest(key: etcdKey, value: data))], resending: false,
            fencingRemovals: expected == nil) != nil
    }

    /// Removes what is stored under `key`, and the tags of its updates' writes, in one transaction that also writes the
    /// removals key of its bucket (see ``write(key:data:)``); nothing stored is no error.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the request failed.
    public func remove(key: String) throws {
        let operations = [
            RequestOp(requestDeleteRange: DeleteRangeRequest(key: etcdKey(key))),
            RequestOp(requestDeleteRange: DeleteRangeRequest(key: tagsKey(key))), removalMark(key),
        ]
        _ = try fenced(key: key, conditions: [], operations: operations, resending: true, fencingRemovals: false)
    }

    /// Removes what is stored under `key` only while it is `data`, with the tags of its updates' writes, in one
    /// transaction that also writes the removals key of its bucket, and returns whether it did.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the transaction failed, or it is not known whether
    ///   it was carried out.
    public func remove(key: String, ifItHolds data: Data) throws -> Bool {
        try checkSize(of: [key, key], [data], key: key)
        let etcdKey = etcdKey(key)
        let operations = [
            RequestOp(requestDeleteRange: DeleteRangeRequest(key: etcdKey)),
            RequestOp(requestDeleteRange: DeleteRangeRequest(key: tagsKey(key))), removalMark(key),
        ]
        return try fenced(
            key: key, conditions: [Compare(target: "VALUE", key: etcdKey, value: data)], operations: operations,
            resending: false, fencingRemovals: false) != nil
    }

    /// Stores every write of `batch`, in transactions of at most 127 puts (etcd's default `--max-txn-ops` of 128, less
    /// a comparison of the namespace's removals keys, every bucket's, when one per bucket does not fit) and about 1 MiB of keys and values, sent one
    /// after the other; a key written twice in one transaction is written once, with its last bytes (etcd refuses a
    /// transaction that puts a key twice). Each transaction is fenced as a put is (see ``write(key:data:)``). A
    /// transaction that reached no member, or whose answer was lost (a member restarting, or out of reach for a
    /// moment), is sent again with a backoff within the store's timeout from the batch's start: the flush at exit
    /// writes its values once the member is back. The fence makes a transaction carried out already put the same bytes
    /// again, after any write made since. The fence of a transaction compares the keys from its first to its last in
    /// byte order, all of them: a batch in the keys' order, as the package's flush sends, keeps that range to the
    /// transaction's own keys.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when a transaction failed, or it is not known whether
    ///   it was carried out; ``WLStorageError/storedWrites`` counts the writes of the transactions carried out before
    ///   it.
    public func write(_ batch: [WLStorageStoreWrite]) throws {
        let deadline = ContinuousClock.now + timeout
        var stored = 0
        for chunk in Self.chunks(of: batch) {
            var last: [String: Int] = [:]
            for index in chunk { last[batch[index].key] = index }
            let puts = chunk.filter { last[batch[$0].key] == $0 }.map { index in
                RequestOp(requestPut: PutRequest(key: etcdKey(batch[index].key), value: batch[index].data))
            }
            var failures = 0
            while true {
                do throws(WLStorageError) {
                    // Each key twice: in its put, and in the fence.
                    let keys = chunk.map { batch[$0].key }
                    try checkSize(of: keys + keys, chunk.map { batch[$0].data }, key: nil)
                    try fencedBatch(Array(Set(keys)), operations: puts)
                    break
                } catch {
                    // 10 ms, doubling, up to a quarter of a second, and never past the deadline.
                    failures += 1
                    let pause = Duration.milliseconds(min(10 << min(failures - 1, 5), 250))
                    if (error.underlying as? EtcdFailure).map({ $0.outcome != .refused }) ?? false,
                        ContinuousClock.now + pause < deadline
                    {
                        usleep(UInt32(pause / .microseconds(1)))
                        continue
                    }
                    var error = error
                    error.storedWrites = stored
                    error.message += " (\(stored) of the batch's \(batch.count) values were stored)"
                    throw error
                }
            }
            stored = chunk.upperBound
        }
    }

    /// The ranges of `batch` written by one transaction each: at most 127 puts, whose comparisons, one a key, and the
    /// removals' make 128.
    static func chunks(of batch: [WLStorageStoreWrite]) -> [Range<Int>] {
        chunks(count: batch.count, operations: transactionOperations - 1) {
            batch[$0].key.utf8.count + batch[$0].data.count
        }
    }

    /// The ranges of `count` writes sent in one transaction each: at most `operations` writes, and at most
    /// ``transactionBytes`` of the bytes `size` counts for each write (a write that alone holds more, alone).
    static func chunks(count: Int, operations: Int, size: (Int) -> Int) -> [Range<Int>] {
        var chunks: [Range<Int>] = []
        var start = 0
        var bytes = 0
        for index in 0..<count {
            let size = size(index)
            if index > start && (index - start >= operations || bytes + size > transactionBytes) {
                chunks.append(start..<index)
                start = index
                bytes = 0
            }
            bytes += size
        }
        if start < count { chunks.append(start..<count) }
        return chunks
    }

    /// Every key of the namespace, sorted by their bytes; read in pages of 1,000, each at the revision of its read (a
    /// page pinned to the first one's revision would be refused once it is compacted).
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when a request failed.
    public func keys() throws -> [String] {
        var keys: [String] = []
        var start = prefix
        while true {
            let request = RangeRequest(key: start, rangeEnd: prefixEnd, limit: "1000", keysOnly: true)
            let answer: RangeResponse = try perform(reading: true, key: nil) {
                () throws(EtcdFailure) in
                try client.call("v3/kv/range", request, resending: true)
            }
            let found = answer.kvs ?? []
            keys += found.compactMap { key(of: $0.key) }
            guard answer.more == true, let last = found.last else { return keys }
            start = last.key + Data([0])
        }
    }

    /// A key of the namespace with what it holds, as ``entries()`` reads it.
    public struct Entry: Sendable, Equatable {
        /// The key.
        public var key: String
        /// The bytes stored under it.
        public var value: Data
        /// The revision of the cluster at which it was last written (etcd's `mod_revision`).
        public var revision: Int64
    }

    /// Every key of the namespace with its bytes and the revision it was last written at, sorted by the keys' bytes;
    /// read in pages of 100 keys, each at the revision of its read, as ``keys()`` reads them.
    ///
    /// - Throws: ``WLStorageError`` with the code `readFailed` when a request failed.
    public func entries() throws -> [Entry] {
        var entries: [Entry] = []
        var start = prefix
        while true {
            let request = RangeRequest(key: start, rangeEnd: prefixEnd, limit: "100")
            let answer: RangeResponse = try perform(reading: true, key: nil) {
                () throws(EtcdFailure) in
                try client.call("v3/kv/range", request, resending: true)
            }
            let found = answer.kvs ?? []
            for kv in found {
                guard let key = key(of: kv.key) else { continue }
                entries.append(
                    Entry(key: key, value: kv.value ?? Data(), revision: kv.modRevision.flatMap { Int64($0) } ?? 0))
            }
            guard answer.more == true, let last = found.last else { return entries }
            start = last.key + Data([0])
        }
    }

    /// Starts watching the namespace from the current revision.
    ///
    /// Once the watch is made, and again whenever it is made anew rather than resumed (the revision it stopped at was
    /// compacted, or the cluster is another one), the feed reports ``WLStorageStoreChange/everything``. A watch whose
    /// connection is lost is made again from the revision after the last one it reported, on the next endpoint when
    /// one fails: no change is missed, and nothing more is reported. Every change is reported, the store's own writes
    /// included. `changed` is called on the watch's queue, one change at a time.
    public func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void)
        -> WLStorageSubscription?
    {
        observeCarriedChanges { event in
            switch event {
            case .change(let change): changed(change)
            case .carried(let change): changed(.key(change.key))
            }
        }
    }

    // MARK: - WLStorageCarryingStore

    /// The feed of ``observeChanges(_:)``, with each put reported with the key's version and bytes, as the watch's
    /// events hold them: a storage of the key takes them without a read when the versions follow on from the one it
    /// knows. A removal is reported as a change to read.
    public func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void)
        -> WLStorageSubscription?
    {
        let watcher = EtcdWatcher(
            client: client, prefix: prefix, prefixEnd: prefixEnd,
            key: { [prefix] etcdKey in
                etcdKey.starts(with: prefix) ? String(decoding: etcdKey.dropFirst(prefix.count), as: UTF8.self) : nil
            }, health: health, changed: changed)
        watcher.start()
        return WLStorageSubscription { watcher.cancel() }
    }

    // MARK: - Errors

    /// Throws ``WLStorageError/Code/valueTooLarge`` when the keys and bytes of a request would make more than
    /// ``maximumRequestBytes``: the request is not sent.
    func checkSize(of keys: [String], _ values: [Data], key: String?) throws(WLStorageError) {
        let size = keys.reduce(0) { $0 + prefix.count + $1.utf8.count } + values.reduce(0) { $0 + $1.count }
        guard size > Self.maximumRequestBytes else { return }
        throw WLStorageError(
            code: .valueTooLarge,
            message: "\(identity): the write holds \(size) bytes of keys and values, more than one request to etcd may"
                + " (\(Self.maximumRequestBytes) bytes, under its default --max-request-bytes); it is not sent",
            key: key, path: identity)
    }

    /// Runs `body`, and turns its failure into a ``WLStorageError`` (`readFailed` or `writeFailed`) that names the store
    /// and the key.
    func perform<Answer>(
        reading: Bool, key: String?, _ body: () throws(EtcdFailure) -> Answer
    ) throws(WLStorageError) -> Answer {
        do {
            return try body()
        } catch {
            throw failure(error, reading: reading, key: key)
        }
    }

    /// The ``WLStorageError`` (`readFailed` or `writeFailed`) of a call that failed with `error`, naming the store and
    /// the key.
    func failure(_ error: EtcdFailure, reading: Bool, key: String?) -> WLStorageError {
        let outcome =
            switch error.outcome {
            case .notSent: "failed: no endpoint answered"
            case .refused: "was refused"
            case .unknown: reading ? "failed" : "failed, and it is not known whether it was carried out"
            }
        return WLStorageError(
            code: reading ? .readFailed : .writeFailed,
            message: "\(identity): the \(reading ? "read" : "write") \(outcome) (\(error.description))", key: key,
            path: identity, underlying: error)
    }
}
