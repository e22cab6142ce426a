import Foundation

/// What a cell needs of its backer beyond ``WLStorageBacker``: to tell a stored value from nothing stored, to save a
/// default only where nothing is stored, and to read a change made elsewhere. The file backer, the backer of a
/// ``WLStorageStore`` and the wrapper of a custom backer with a change feed provide it; a plain custom backer does not,
/// and its cell reads it through ``StorageCell/read(_:defaultValue:)`` and never saves a default.
protocol StoreBacking<Value>: Sendable {
    associatedtype Value: Codable & Sendable

    /// Reads what is stored: a value (reshaped to the current type by `decoding`'s steps, or not), nothing, a value
    /// that did not decode and was kept aside, or a failure.
    func readStored(decoding: ValueDecoding<Value>) -> ReadResult<Value>

    /// Stores `value` unless something is stored; returns whether it did.
    func create(value: Value) throws(WLStorageError) -> Bool

    /// Whether something stands where the value is stored even though a read found nothing (an empty file): a default
    /// is then not saved over it.
    var entryExists: Bool { get }

    /// What changed since this backer last wrote or read: its own versions are not changes. A change is decoded by
    /// `decoding`'s steps but never written back: the program that stored it may still be at work.
    func readExternalChange(decoding: ValueDecoding<Value>) throws(WLStorageError) -> ExternalChange<Value>

    /// Makes the next write leave out the members of the stored JSON object that the value's type does not know
    /// (see ``UnknownFields``); a backer that keeps none does nothing.
    func dropUnknownFields()

    /// Writes `value`, the rewrite in the current shape of a value read in an earlier one, only while the key holds
    /// what this backer read (or wrote) last; returns whether it did, or `nil` when the backer cannot tell, for a plain
    /// write. A rewrite is no change of the program's user: another program's value stored since the read, whose news
    /// has not come yet, is read instead.
    func rewrite(_ value: Value) throws -> Bool?

    /// Takes the version this backer read last as not seen, when a read came after its last write: the next check
    /// reports what the key holds then as a change (or a removal). A version it wrote last stays seen. For a check
    /// whose read the cell did not adopt because a change of this process was written meanwhile: which of the two the
    /// key holds last is then told by the next check.
    func forgetLastRead()
}

extension WLStorageDefaultBacker: StoreBacking {
    func readStored(decoding: ValueDecoding<T>) -> ReadResult<T> {
        readStored(prepared: false, decoding: decoding)
    }
}

/// The version of a key a backer saw last, by a hash of its bytes: the one it last wrote or read, whichever came
/// later. Only that one is not a change: a store's bytes carry no identity, so an outside change back to an earlier
/// version (written or read before) is a change like any other.
struct KnownBytes: Sendable {
    /// The hash of the version seen last, or 0 for none; a hash is odd, and 2 stands for a version read and then
    /// forgotten (see ``forgetLastRead()``).
    private var last = 0
    /// Whether the version seen last was read (not written).
    private var lastWasRead = false
    /// The bytes of the version seen last, when they are a JSON object, whose members the value's type does not know a
    /// write keeps (see ``UnknownFields``).
    private var base = UnknownFieldsBase()

    /// The bytes whose unknown members a write keeps: none when the next write is to drop them, which it then does.
    mutating func takeBase() -> Data? { base.take() }

    mutating func dropUnknownFields() { base.dropUnknownFields() }

    /// Takes `data`, read but not adopted (bytes another version stored), as what the next write replaces: its unknown
    /// members are kept. The version seen last stays, so that a check still reports the bytes.
    mutating func replacing(_ data: Data) { base.record(data) }

    static func hash(_ data: Data) -> Int {
        var hasher = Hasher()
        data.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize() | 1
    }

    mutating func wrote(_ data: Data) {
        last = Self.hash(data)
        lastWasRead = false
        base.record(data)
    }

    /// Takes the version read last, if the last version seen was read, as one no read matches, while a version is still
    /// known (so that a removal is one).
    mutating func forgetLastRead() {
        if lastWasRead && last != 0 { last = 2 }
    }

    /// Records `data` as read; returns whether it is the version seen last.
    mutating func readKnown(_ data: Data) -> Bool {
        let hash = Self.hash(data)
        defer {
            last = hash
            lastWasRead = true
            base.record(data)
        }
        return hash == last
    }

    /// Forgets the version; returns whether one was known.
    mutating func forget() -> Bool {
        defer {
            last = 0
            lastWasRead = false
            base.record(nil)
        }
        return last != 0
    }
}

/// The backer of a key in a ``WLStorageStore``: the JSON encoding of the value over the store's bytes.
final class StoreBacker<T: Codable & Sendable>: WLStorageBacker, StoreBacking {
    /// The key as the storage was created with it.
    let key: String
    /// The store that holds the bytes, and the key there (a prefixed store's key with its prefix).
    let store: any WLStorageStore
    let storedKey: String
    /// The store's identity, read once: the registry, the feeds and the batches know the backer by it, and a store
    /// whose identity changed later would leave a feed or a cell under the old one.
    let identity: String
    private let known = Lock(KnownBytes())
    /// The bytes a value to be rewritten was read from (in an earlier shape, or under a previous key), which a store
    /// that writes on condition replaces only while it still holds them.
    private let rewriteFrom = Lock<Data?>(nil)
    /// Whether an update has reported that the store cannot tag writes (see ``VersionedRead/untagged(_:)``).
    private let untaggedReported = Lock(false)
    /// The store's feed of carried changes, when it has one, and the version of the key this backer knows, with what
    /// the feed carried since its last check (see ``CarriedVersions``).
    private let carriedFeed: (any CarriedChangeFeed)?
    private let versions = Lock(CarriedVersions())

    init(key: String, store: any WLStorageStore, storedKey: String) {
        self.key = key
        self.store = store
        self.storedKey = storedKey
        self.identity = store.identity
        self.carriedFeed = Stores.carrying(store)
    }

    /// Hands this backer changes its store's feed carried, or (`mustRead`) a change it reported without one: the next
    /// check adopts them or reads the key (see ``CarriedVersions/take()``).
    func offer(_ changes: [CarriedChange], mustRead: Bool) {
        guard carriedFeed != nil else { return }
        versions.withLock { $0.offer(changes, mustRead: mustRead) }
    }

    /// Forgets the version of the key: this backer is writing it, and the version its write makes is not known. The
    /// next carried change then reads the key.
    private func forgetVersion() {
        guard carriedFeed != nil else { return }
        versions.withLock { $0.known = nil }
    }

    func read(defaultValueClosure: () -> T) throws -> T {
        let found = withoutActuallyEscaping(defaultValueClosure) { makeDefault in
            readStored(decoding: ValueDecoding(defaultValue: makeDefault, migrations: []))
        }
        switch found {
        case .value(let value), .reshaped(let value, _, _): return value
        case .absent: return defaultValueClosure()
        case .movedAside(let error), .failed(let error), .anotherVersion(let error): throw error
        }
    }

    /// Writes `value`, the rewrite of what was read, on condition that the key still holds the bytes it was read
    /// from; returns whether it did, or `nil` when the store does not write on condition (or nothing is known of the
    /// bytes), for a plain write.
    func rewrite(_ value: T) throws -> Bool? {
        guard let expected = rewriteFrom.withLock({ $0 }), let conditional = Stores.conditional(store) else {
            return nil
        }
        let data = try encode(value)
        forgetVersion()
        var stored: Bool
        do {
            stored = try write(data, ifItHolds: expected, through: conditional)
        } catch {
            throw failure(error, writing: true)
        }
        // A write whose answer was lost, retried: the key holds the rewrite already.
        if !stored, (try? store.read(key: storedKey)) == data { stored = true }
        rewriteFrom.withLock { $0 = nil }
        if stored { wrote(data) }
        return stored
    }

    /// Stores `data` only while the key holds `expected`, through `conditional` (this backer's store, seen as one
    /// that writes on condition), and returns whether it did. When the answer is lost, the key, read again, tells:
    /// holding `data`, it was stored (another program storing the very same bytes meanwhile is told from it by
    /// nothing); otherwise the write's error is thrown, and whether it was made is not known.
    func write(
        _ data: Data, ifItHolds expected: Data?, through conditional: any WLStorageConditionalStore
    ) throws -> Bool {
        forgetVersion()
        do {
            return try conditional.write(key: storedKey, data: data, ifItHolds: expected)
        } catch {
            guard (try? store.read(key: storedKey)) == data else { throw error }
            return true
        }
    }

    /// Stores `data` through `store` only while the key's version is `version` (for `nil`, while nothing is stored),
    /// as a write tagged with a new random tag, and finds out what became of it.
    ///
    /// A write whose answer is lost is sent again, the same: with the same tag, on the same condition. It stores only
    /// if the first did not, for the first would have changed the version; and once it has been refused, the first
    /// can no longer store either, since versions only grow. The tag then tells: kept in the row, the first one stored;
    /// not kept while the row could not have pushed it out, it did not. Neither bytes nor timing are judged, so
    /// another replica's write of the very same bytes is never taken for this one.
    func write(_ data: Data, ifVersion version: Int64?, through store: any VersionedConditionalStore)
        -> TaggedWriteOutcome
    {
        let tag = WriteTag.random()
        forgetVersion()
        // Whether an attempt may have reached the store, and stored.
        var sent = false
        var lastError: any Error = WLStorageError(code: .writeFailed, message: "no attempt", key: key)
        for attempt in 0..<Self.taggedWriteAttempts {
            if attempt > 1 { usleep(Self.taggedWriteBackoff(attempt)) }
            do {
                switch try store.write(key: storedKey, data: data, ifVersion: version, tag: tag) {
                case .stored:
                    return .stored(overwritten: false)
                case .refused:
                    guard sent else { return .refused }
                    guard let trace = try store.trace(of: tag, key: storedKey) else {
                        return .unknown(
                            WLStorageError(
                                code: .writeFailed,
                                message: "\(identity): the key was removed while the answer to the update's write was"
                                    + " lost",
                                key: key))
                    }
                    switch trace.committed(ifVersion: version) {
                    case true?: return .stored(overwritten: trace.version != (version ?? 0) &+ 1)
                    case false?: return .refused
                    case nil:
                        return .unknown(
                            WLStorageError(
                                code: .writeFailed,
                                message:
                                    "\(identity): the key was written \(trace.version &- (version ?? 0)) times since"
                                    + " the update read it, more than the \(trace.capacity) writes whose tags it keeps",
                                key: key))
                    }
                case .notStored(let error):
                    guard sent else { return .notStored(error) }
                    lastError = error
                }
            } catch {
                sent = true
                lastError = error
            }
        }
        return .unknown(lastError)
    }

    /// How many times a tagged write is sent, the first time and again after answers lost, before its outcome counts
    /// as unknown.
    static var taggedWriteAttempts: Int { 12 }

    /// The pause before attempt `attempt` of a tagged write, in microseconds: none before the first resend (the
    /// sooner the row is asked, the fewer writes of others can have pushed the tag out), then 5 ms, doubling, up to
    /// half a second.
    static func taggedWriteBackoff(_ attempt: Int) -> UInt32 {
        attempt < 2 ? 0 : UInt32(min(5_000 << min(attempt - 2, 10), 500_000))
    }

    /// Reports, once per backer, that its store cannot tag writes: the first update says so, the others do not.
    func firstUntaggedReport() -> Bool {
        untaggedReported.withLock { reported in
            defer { reported = true }
            return !reported
        }
    }

    func write(value: T) throws {
        let data = try encode(value)
        forgetVersion()
        do {
            try store.write(key: storedKey, data: data)
        } catch {
            throw failure(error, writing: true)
        }
        wrote(data)
    }

    deinit {
        KeptOriginals.forget(self)
    }

    /// The bytes of `value`, with the members of the bytes this backer last read or wrote that its type does not know
    /// (see ``UnknownFields``), checked against the size limit.
    func encode(_ value: T) throws(WLStorageError) -> Data {
        try JSONCoders.encode(value, key: key, keepingUnknownOf: known.withLock { $0.takeBase() })
    }

    /// Makes the next write leave out the members of the stored object that the value's type does not know.
    func dropUnknownFields() {
        known.withLock { $0.dropUnknownFields() }
    }

    func forgetLastRead() {
        known.withLock { $0.forgetLastRead() }
    }

    /// Makes `data`, bytes this version read but cannot decode, what the next write replaces: the write keeps their
    /// members that the value's type does not know, rather than those of bytes read before.
    func willReplace(_ data: Data) {
        known.withLock { $0.replacing(data) }
    }

    /// The bytes of `value` to replace `stored`, with the members of `stored` that its type does not know.
    func encode(_ value: T, replacing stored: Data?) throws(WLStorageError) -> Data {
        try JSONCoders.encode(value, key: key, keepingUnknownOf: stored.flatMap(UnknownFields.base))
    }

    /// Records `data` as the version this backer wrote (by itself, or in a batch of its store). Bytes kept from
    /// before the type changed go now: what is stored is in the current shape.
    func wrote(_ data: Data) {
        forgetVersion()
        known.withLock { $0.wrote(data) }
        rewriteFrom.withLock { $0 = nil }
        if KeptOriginals.any, KeptOriginals.take(self) {
            do {
                _ = try store.remove(key: keptOriginalKey)
            } catch {
                KeptOriginals.keep(self)  // removed after the next write
            }
        }
    }

    /// The key the bytes of a value from before its type changed are kept under until it is written in the current
    /// shape.
    var keptOriginalKey: String { storedKey + StorageDirectory.keptOriginalSuffix }

    func readStored(decoding: ValueDecoding<T>) -> ReadResult<T> {
        readStored(decoding: decoding, keepingAside: true)
    }

    /// Reads the key. Bytes that do not decode are kept aside (see ``keepAside(_:_:_:again:)``), which reads once
    /// more when the key changed meanwhile. Bytes that decode only once reshaped are kept as they were under
    /// ``keptOriginalKey`` until the value is written back.
    private func readStored(decoding: ValueDecoding<T>, keepingAside again: Bool) -> ReadResult<T> {
        let data: Data?
        // A value of an encrypted store sealed with a previous key is written again under the current one, by the
        // storage's own write: a rewrite, which gives way to a change made elsewhere meanwhile.
        var underPreviousKey = false
        do {
            if let encrypted = store as? WLStorageEncryptedStore {
                forgetVersion()
                data = try encrypted.read(key: storedKey, underPreviousKey: &underPreviousKey)
            } else if let carriedFeed {
                data = try readWithVersion(carriedFeed)
            } else {
                data = try store.read(key: storedKey)
            }
        } catch {
            // Bytes that are not sealed at all are no one's secret: kept aside, so that they do not block the key.
            if let encrypted = store as? WLStorageEncryptedStore, (error as? WLStorageError)?.code == .decodingFailed,
                let aside = try? encrypted.keepUnsealedAside(key: storedKey)
            {
                _ = known.withLock { $0.forget() }
                return .movedAside(
                    WLStorageError(
                        code: .decodingFailed,
                        message: "what \(identity) holds is not an encrypted value (plain JSON saved by a program"
                            + " started without the key, perhaps); it was kept aside, as it is, under the key \(aside)",
                        key: key, path: (error as? WLStorageError)?.path))
            }
            return .failed(failure(error, writing: false))
        }
        guard let data, !data.isEmpty else { return .absent }
        _ = known.withLock { $0.readKnown(data) }
        switch decoding.decode(data) {
        case .decoded(let value, nil), .decoded(let value, .filledIn):
            // Bytes filled in from the default are not written back: reading never writes.
            guard underPreviousKey else { return .value(value) }
            rewriteFrom.withLock { $0 = data }
            return .reshaped(value, rewrite: true, note: nil)
        case .decoded(let value, let reshape?):
            do {
                _ = try store.create(key: keptOriginalKey, data: data)
            } catch {
                return .reshaped(
                    value, rewrite: false,
                    note: WLStorageError(
                        code: .writeFailed,
                        message: "what \(identity) holds \(reshape.description); it could not be kept under the key"
                            + " \(keptOriginalKey), so it is left in its old shape: \(error)",
                        key: key, underlying: error))
            }
            KeptOriginals.keep(self)
            rewriteFrom.withLock { $0 = data }
            return .reshaped(value, rewrite: true, note: nil)
        case .anotherVersion(let decodingError, let failures):
            // Left as it is: the version that stored it may still be at work, or come back after a rollback.
            return .anotherVersion(
                WLStorageError(
                    code: .storedByAnotherVersion,
                    message: "what \(identity) holds \(judge(data, migrationFailures: failures)): another version of"
                        + " the program stored it; it is left as it is, and this storage uses its last value (the"
                        + " default at start) until it is set",
                    key: key, underlying: conceals ? nil : decodingError))
        case .undecodable(let decodingError, let failures):
            if !conceals, let sealed = SealedElsewhere.error(data, key: key, path: nil) { return .failed(sealed) }
            return keepAside(data, decodingError, failures, decoding: decoding, again: again)
        }
    }

    /// Whether a default is saved where nothing is stored. Not in a store whose values are secret: a default saved
    /// there would be sealed with whatever key the program has, and a program started once with the wrong key would
    /// leave bytes that the programs with the right key can neither open nor replace. Nothing stored reads as the
    /// default all the same.
    var savesDefault: Bool { !conceals }

    func create(value: T) throws(WLStorageError) -> Bool {
        guard savesDefault else { return true }
        let data = try encode(value)
        forgetVersion()
        let created: Bool
        do {
            created = try store.create(key: storedKey, data: data)
        } catch {
            throw failure(error, writing: true)
        }
        if created { wrote(data) }
        return created
    }

    /// Whether the key holds anything, even empty bytes (which read as nothing stored, and are not replaced by a
    /// default).
    var entryExists: Bool { (try? store.read(key: storedKey)) != nil }

    /// Reads the key through `feed`, and records its version.
    private func readWithVersion(_ feed: any CarriedChangeFeed) throws -> Data? {
        forgetVersion()
        let found = try feed.readWithVersion(key: storedKey)
        versions.withLock { $0.known = found?.version }
        return found?.data
    }

    /// The bytes a check for another program's change looks at: what its store's feed carried when that can be
    /// trusted (see ``CarriedVersions``), else the key read: `.some(nil)` for nothing stored, and `nil` when the feed
    /// carried nothing newer than what this backer knows.
    private func bytesForCheck() throws -> Data?? {
        guard let carriedFeed else { return .some(try store.read(key: storedKey)) }
        switch versions.withLock({ $0.take() }) {
        case .stale:
            return nil
        case .adopt(let carried, let version):
            let data = try carriedFeed.opened(carried, key: storedKey)
            versions.withLock { $0.known = version }
            return .some(data)
        case .read:
            return .some(try readWithVersion(carriedFeed))
        }
    }

    func readExternalChange(decoding: ValueDecoding<T>) throws(WLStorageError) -> ExternalChange<T> {
        let data: Data?
        do {
            guard let bytes = try bytesForCheck() else { return .unchanged }
            data = bytes
        } catch let error as WLStorageError where conceals && error.code == .decodingFailed {
            // Bytes of a secret store that do not open (another key's value): what is stored is unknown to this
            // program, which must not replace it.
            _ = known.withLock { $0.forget() }
            return .unreadable(failure(error, writing: false))
        } catch {
            throw failure(error, writing: false)
        }
        guard let data, !data.isEmpty else {
            return known.withLock { $0.forget() } ? .removed : .unchanged
        }
        if known.withLock({ $0.readKnown(data) }) { return .unchanged }
        do {
            return .changed(try decoding.value(of: data))
        } catch {
            if !conceals, let sealed = SealedElsewhere.error(data, key: key, path: nil) { return .unreadable(sealed) }
            throw WLStorageError(
                code: error.anotherVersion ? .storedByAnotherVersion : .decodingFailed,
                message: "someone stored bytes that"
                    + " \(judge(data, migrationFailures: error.migrationFailures)) in \(identity)"
                    + (error.anotherVersion ? " (another version of the program stored them)" : "")
                    + "; the value in memory is kept and what is stored is left as it is",
                key: key, underlying: conceals ? nil : error.error)
        }
    }

    /// Bytes that do not decode are copied to another key of the store, named with `~corrupt-` and the time, and
    /// removed from this one while it still holds them: they are kept, and the key counts as holding nothing. When
    /// someone stored something else meanwhile, that is read instead.
    private func keepAside(
        _ data: Data, _ decodingError: any Error, _ failures: [String], decoding: ValueDecoding<T>, again: Bool
    ) -> ReadResult<T> {
        let judged = judge(data, migrationFailures: failures)
        let decodingError: (any Error)? = conceals ? nil : decodingError
        let aside = StorageDirectory.movedAsideName(for: storedKey)
        do {
            _ = try store.create(key: aside, data: data)
            guard try store.remove(key: storedKey, ifItHolds: data) else {
                return again
                    ? readStored(decoding: decoding, keepingAside: false)
                    : .failed(
                        WLStorageError(
                            code: .decodingFailed,
                            message:
                                "what \(identity) holds \(judged), and changes while it is kept aside",
                            key: key, underlying: decodingError))
            }
        } catch {
            return .failed(
                WLStorageError(
                    code: .decodingFailed,
                    message:
                        "what \(identity) holds \(judged), and it could not be kept aside:"
                        + " \(error)",
                    key: key, underlying: decodingError))
        }
        forgetVersion()
        _ = known.withLock { $0.forget() }
        return .movedAside(
            WLStorageError(
                code: .decodingFailed,
                message: "what \(identity) holds \(judged); it was kept aside under the key"
                    + " \(aside)",
                key: key, underlying: decodingError))
    }

    /// Whether the store's values are secret (``ConcealsValues``): messages then say that bytes do not decode, not
    /// what is wrong in them, which could quote them, and carry no decoding error.
    private var conceals: Bool { store is any ConcealsValues }

    private func judge(_ data: Data, migrationFailures: [String]) -> String {
        conceals
            ? "does not decode as \(T.self)" : ValueDecoding<T>.judge(data, migrationFailures: migrationFailures)
    }

    private func failure(_ error: any Error, writing: Bool) -> WLStorageError {
        if var error = error as? WLStorageError {
            if error.key == nil { error.key = key }
            return error
        }
        return WLStorageError(
            code: writing ? .writeFailed : .readFailed,
            message: "\(identity) could not \(writing ? "store" : "read") the value: \(error)", key: key,
            underlying: error)
    }
}

/// A custom backer with a change feed, wrapped so that its cell can tell its own versions from changes made
/// elsewhere: by the JSON encoding of the values it wrote and read.
final class ObservedBacker<T: Codable & Sendable>: WLStorageBacker, StoreBacking {
    let base: any WLStorageObservableBacker<T>
    /// The default, made when the storage began following the feed.
    let defaultValue: T
    /// The backer's feed, which ends with this wrapper, and so with the cell.
    private let observation: WLStorageSubscription
    private let known = Lock(KnownBytes())

    init(_ base: any WLStorageObservableBacker<T>, defaultValue: T, observation: WLStorageSubscription) {
        self.base = base
        self.defaultValue = defaultValue
        self.observation = observation
    }

    var key: String { base.key }

    func read(defaultValueClosure: () -> T) throws -> T {
        try base.read(defaultValueClosure: defaultValueClosure)
    }

    func write(value: T) throws {
        try base.write(value: value)
        if let data = try? JSONCoders.encoder.encode(value) { known.withLock { $0.wrote(data) } }
    }

    /// Reads the backer: the value, or `nil` when it asked for the default; with whether the value is a version this
    /// backer wrote or read last.
    private func readBase() throws(WLStorageError) -> (value: T, known: Bool)? {
        var absent = false
        let value: T
        do {
            value = try base.read {
                absent = true
                return defaultValue
            }
        } catch {
            throw WLStorageError(wrapping: error, key: key)
        }
        if absent { return nil }
        guard let data = try? JSONCoders.encoder.encode(value) else { return (value, false) }
        return (value, known.withLock { $0.readKnown(data) })
    }

    /// The custom backer decodes by itself: `decoding` has no part.
    func readStored(decoding: ValueDecoding<T>) -> ReadResult<T> {
        do {
            guard let (value, _) = try readBase() else { return .absent }
            return .value(value)
        } catch {
            return .failed(error)
        }
    }

    /// Never called: a custom backer is written with changes only, never with a default.
    func create(value: T) throws(WLStorageError) -> Bool { true }

    /// A custom backer encodes by itself: it keeps no fields.
    func dropUnknownFields() {}

    /// A custom backer's versions are known by their encoding alone, which tells nothing of who stored them.
    func rewrite(_ value: T) throws -> Bool? { nil }

    func forgetLastRead() {
        known.withLock { $0.forgetLastRead() }
    }

    var entryExists: Bool { false }

    func readExternalChange(decoding: ValueDecoding<T>) throws(WLStorageError) -> ExternalChange<T> {
        guard let (value, isKnown) = try readBase() else {
            return known.withLock { $0.forget() } ? .removed : .unchanged
        }
        return isKnown ? .unchanged : .changed(value)
    }
}

/// Bytes that an encrypted store sealed, found by a storage without a key (a program started without its key file):
/// what they hold is unknown to it, so they are neither moved aside nor replaced.
enum SealedElsewhere {
    /// The error for `data` when it is a sealed value; `nil` otherwise.
    static func error(_ data: Data, key: String, path: String?) -> WLStorageError? {
        guard let fingerprint = SealedBox.fingerprint(ofKeyThatSealed: data) else { return nil }
        return WLStorageError(
            code: .decodingFailed,
            message: "what is stored is a value sealed by an encrypted store, with key \(SHA256.hex(fingerprint)), and"
                + " this storage has no key: it is left as it is, and nothing is written over it until it is removed"
                + " (give the storage the key with `.encrypted(with:)`)",
            key: key, path: path)
    }
}
