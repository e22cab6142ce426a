import Foundation
import Synchronization
import WLStorageFiles

/// A key of a ``WLStorageStore`` other than a directory as a ``KeyMedium``, with what only a store offers: a carried
/// feed, encryption, conditional, versioned and batch writes. Versions are stamped by bytes alone.
final class StoreMedium: KeyMedium {
    /// The store that holds the bytes, and the key there (a prefixed store's key with its prefix).
    let store: any WLStorageStore
    let storedKey: String
    /// The store's identity, read once, so a store whose identity changes leaves nothing under the old one.
    let identity: String
    /// The bytes a value to rewrite was read from, which a conditional store replaces only while it holds them.
    private let rewriteFrom = Lock<Data?>(nil)
    /// Whether an update has reported that the store cannot tag writes (see `WLStorageVersionedRead/untagged(_:)`).
    private let untaggedReported = Atomic<Bool>(false)
    /// The store's carried feed, if any, and what it carried (``CarriedVersions``); capabilities found once.
    private let carriedFeed: (any CarriedChangeFeed)?
    private let versions = Lock(CarriedVersions())
    /// Whether there is a ``carriedFeed``, asked at every write without copying it.
    private let carries: Bool
    /// The store when its feed is its own (not an encrypted store's): its writes and reads say their versions.
    private let carrying: (any WLStorageCarryingStore)?
    private let encrypted: WLStorageEncryptedStore?
    /// Whether the store writes on condition: a flush of every storage asks it of each.
    let writesOnCondition: Bool
    /// Whether the store rewrites on condition (``StoreCapabilities/rewrites``): a flush of all leaves a rewrite to it.
    let rewritesOnCondition: Bool

    var capabilities: StoreCapabilities { Stores.capabilities(of: store) }

    init(store: any WLStorageStore, storedKey: String, capabilities: StoreCapabilities) {
        self.store = store
        self.storedKey = storedKey
        self.identity = store.identity
        (carriedFeed, encrypted) = (capabilities.carried, capabilities.encrypted)
        carries = capabilities.carried != nil
        carrying = (capabilities.carried as? StoreCarriedFeed)?.store
        writesOnCondition = capabilities.conditional != nil
        rewritesOnCondition = capabilities.rewrites != nil
    }

    /// The key in the store, as messages name it: "the key's value in <identity>".
    func place(key: String) -> StoredPlace {
        StoredPlace(key: key, subject: "the key's value in \(identity)", file: nil, conceals: conceals)
    }

    var conceals: Bool { encrypted != nil }

    /// Whether a default is saved where nothing is stored. Not in a secret store: a default sealed with a wrong key
    /// would leave bytes the right key's programs can neither open nor replace.
    var savesDefault: Bool { !conceals }

    func entryExists(key: String) -> Bool { (try? store.read(key: storedKey)) != nil }

    /// Hands this medium carried changes, or an uncarried one (`mustRead`) (``CarriedVersions/take()``).
    func offer(_ changes: [WLStorageCarriedChange], mustRead: Bool) {
        guard carriedFeed != nil else { return }
        versions.withLock { $0.offer(changes, mustRead: mustRead) }
    }

    /// Forgets the version of the key while the backer writes it: the next carried change then reads the key.
    private func forgetVersion() {
        guard carries else { return }
        versions.withLock { $0.know(nil, bytes: nil) }
    }

    // MARK: Reads

    func read(key: String, prepared: Bool) -> MediumRead {
        let data: Data?
        // A value sealed with a previous key is written again under the current one, as a rewrite.
        var underPreviousKey = false
        do {
            if let encrypted {
                forgetVersion()
                data = try encrypted.read(key: storedKey, underPreviousKey: &underPreviousKey)
            } else if let carriedFeed {
                data = try readWithVersion(carriedFeed)
            } else {
                data = try store.read(key: storedKey)
            }
        } catch {
            // Bytes not sealed at all are no one's secret: kept aside, so they do not block the key.
            if let encrypted, (error as? WLStorageError)?.code == .decodingFailed,
                let aside = try? encrypted.keepUnsealedAside(key: storedKey)
            {
                return .keptAside(
                    WLStorageError(
                        code: .decodingFailed,
                        message: "what \(identity) holds is not an encrypted value (plain JSON saved by a program"
                            + " started without the key, perhaps); it was kept aside, as it is, under the key \(aside)",
                        key: key, path: (error as? WLStorageError)?.path))
            }
            return .failed(failure(error, writing: false, key: key))
        }
        guard let data, !data.isEmpty else { return .absent }
        return .bytes(ReadBytes(data: data, stamp: KnownVersions.stamp(data)), underPreviousKey: underPreviousKey)
    }

    private func readWithVersion(_ feed: any CarriedChangeFeed) throws -> Data? {
        forgetVersion()
        let found = try feed.readWithVersion(key: storedKey)
        versions.withLock { $0.know(found?.version, bytes: carrying != nil ? found?.data : nil) }
        return found?.data
    }

    /// The bytes a check looks at: what the feed carried when trusted (``CarriedVersions``), else the key read
    /// (`.some(nil)`: nothing stored); `nil` when nothing newer was carried.
    private func bytesForCheck() throws -> Data?? {
        guard let carriedFeed else { return .some(try store.read(key: storedKey)) }
        switch versions.withLock({ $0.take() }) {
        case .stale:
            return nil
        case .adopt(let carried, let version):
            let data = try carriedFeed.opened(carried, key: storedKey)
            versions.withLock { $0.know(version, bytes: carried) }
            return .some(data)
        case .read:
            return .some(try readWithVersion(carriedFeed))
        }
    }

    func readForCheck(key: String) throws(WLStorageError) -> MediumCheck {
        let data: Data?
        do {
            guard let bytes = try bytesForCheck() else { return .unchanged }
            data = bytes
        } catch let error as WLStorageError where conceals && error.code == .decodingFailed {
            // A secret store's bytes that do not open: unknown, and must not be replaced.
            return .unreadable(failure(error, writing: false, key: key))
        } catch {
            throw failure(error, writing: false, key: key)
        }
        guard let data, !data.isEmpty else { return .bytes(nil) }
        return .bytes(ReadBytes(data: data, stamp: KnownVersions.stamp(data)))
    }

    // MARK: Writes

    func write(key: String, replacing: Bool, announced: Bool, encode: () throws(WLStorageError) -> Data)
        throws(WLStorageError) -> (data: Data, stamp: Int)?
    {
        let data = try encode()
        forgetVersion()
        var version: Int64?
        do {
            if replacing, let carrying {
                version = try carrying.writeWithVersion(key: storedKey, data: data)
            } else if replacing {
                try store.write(key: storedKey, data: data)
            } else if try !store.create(key: storedKey, data: data) {
                return nil
            }
        } catch {
            throw failure(error, writing: true, key: key)
        }
        wrote()
        // The feed's report of this write, heard before or after, is then known news.
        if let version { versions.withLock { $0.know(version, bytes: data) } }
        return (data, KnownVersions.stamp(data))
    }

    /// Written on condition of the bytes read where the store can; elsewhere the key is read again first, and the
    /// rewrite gives way if it changed (only a change stored between that read and the write can still be replaced).
    func rewrite(key: String, announced: Bool, isLast: (Int) -> Bool, encode: () throws(WLStorageError) -> Data)
        throws -> MediumRewrite
    {
        guard let expected = rewriteFrom.withLock({ $0 }) else { return .plain }
        guard let conditional = capabilities.rewrites else {
            let current: Data?
            do {
                current = try store.read(key: storedKey)
            } catch let error as WLStorageError where error.code == .decodingFailed {
                // Bytes that do not open (another key's, damaged) are not the value read: a change since the read.
                current = nil
            } catch {
                throw failure(error, writing: false, key: key)
            }
            guard current == expected else {
                rewriteFrom.withLock { $0 = nil }
                return .gaveWay
            }
            return .plain
        }
        let data = try encode()
        let stored: Bool
        switch write(data, ifItHolds: expected, through: conditional, key: key) {
        case .stored: stored = true
        // A write whose answer was lost, sent again by the store: the key may hold the rewrite already.
        case .refused: stored = (try? store.read(key: storedKey)) == data
        case .notStored(let error): throw error
        case .unknown(let error): throw failure(error, writing: true, key: key)
        }
        rewriteFrom.withLock { $0 = nil }
        guard stored else { return .gaveWay }
        wrote()
        return .written(data, stamp: KnownVersions.stamp(data))
    }

    func willRewrite(_ read: ReadBytes) { rewriteFrom.withLock { $0 = read.data } }

    /// After a write of the key: its version is not known to the feed, and nothing is left to rewrite.
    func wrote() {
        forgetVersion()
        rewriteFrom.withLock { $0 = nil }
    }

    // MARK: Writes on condition, for updates

    /// Stores `data` only while the key holds `expected`, told as a tagged write's outcome: after a lost answer, the key
    /// read again tells stored (`data`), not stored (`expected`), or unknown (anything else, or a failed read).
    func write(
        _ data: Data, ifItHolds expected: Data?, through conditional: any WLStorageConditionalStore, key: String
    ) -> TaggedWriteOutcome {
        forgetVersion()
        do {
            return try conditional.write(key: storedKey, data: data, ifItHolds: expected)
                ? .stored(overwritten: false) : .refused
        } catch {
            switch Result(catching: { try store.read(key: storedKey) }) {
            // Bytes that read as they did before (a value sealed again under another key) cannot tell: not stored.
            case .success(.some(data)) where data != expected: return .stored(overwritten: false)
            case .success(expected): return .notStored(failure(error, writing: true, key: key))
            default: return .unknown(error)
            }
        }
    }

    /// Stores `data` only while the key's version is `version` (`nil`: nothing stored), with a new random tag, and
    /// finds out what became of it (an update's write, or a change's): a write whose answer is lost is resent with the
    /// same tag and condition, which stores only if the first did not (versions only grow); the tag tells.
    func write(
        _ data: Data, ifVersion version: Int64?, through store: any WLStorageVersionedStore, key: String
    ) -> TaggedWriteOutcome {
        let tag = WLStorageWriteTag.random()
        forgetVersion()
        func unknown(_ message: String) -> TaggedWriteOutcome {
            .unknown(WLStorageError(code: .writeFailed, message: "\(identity): " + message, key: key))
        }
        // Whether an attempt may have reached the store, and stored.
        var sent = false
        var lastError: any Error = WLStorageError(code: .writeFailed, message: "no attempt", key: key)
        // Twelve attempts: the first resend at once (its tag less likely pushed out), then 5 ms doubling up to 0.5 s.
        for attempt in 0..<12 {
            if attempt > 1 { usleep(UInt32(min(5_000 << min(attempt - 2, 10), 500_000))) }
            do {
                switch try store.write(key: storedKey, data: data, ifVersion: version, tag: tag) {
                case .stored:
                    return .stored(overwritten: false)
                case .refused:
                    guard sent else { return .refused }
                    guard let trace = try store.trace(of: tag, key: storedKey) else {
                        return unknown("the key was removed while the answer to the write was lost")
                    }
                    switch trace.committed(ifVersion: version) {
                    case true?: return .stored(overwritten: trace.version != (version ?? 0) &+ 1)
                    case false?: return .refused
                    case nil:
                        return unknown(
                            "the key was written \(trace.version &- (version ?? 0)) times since the write read it,"
                                + " more than the \(trace.capacity) writes whose tags it keeps")
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

    /// Stores `data` only while the key holds `expected`, through a versioned store: the key is read with its version,
    /// then written on condition of that version, tagged (``write(_:ifVersion:through:key:)``), so that a write whose
    /// answer is lost is found made or not by its tag. `nil` when the store cannot tag writes now: bytes are compared
    /// instead (an update of the key reports it, once).
    func write(
        _ data: Data, ifItHolds expected: Data?, through store: any WLStorageVersionedStore, key: String
    ) -> TaggedWriteOutcome? {
        let version: Int64?
        do {
            switch try store.readVersioned(key: storedKey) {
            case .found(let found, let at) where found == expected: version = at
            case .absent where expected == nil: version = nil
            case .found, .absent: return .refused
            case .untagged: return nil
            }
        } catch {
            return .notStored(failure(error, writing: false, key: key))
        }
        return write(data, ifVersion: version, through: store, key: key)
    }

    /// Reports once per backer that its store cannot tag writes.
    func firstUntaggedReport() -> Bool { !untaggedReported.exchange(true, ordering: .relaxed) }

    // MARK: Bytes kept elsewhere

    /// The key that keeps the bytes of a value from before its type changed, until written in the current shape.
    var keptOriginalKey: String { storedKey + StorageDirectory.keptOriginalSuffix }

    func keepOriginal(_ data: Data, _ reshape: String, key: String) -> WLStorageError? {
        do {
            _ = try store.create(key: keptOriginalKey, data: data)
            return nil
        } catch {
            return WLStorageError(
                code: .writeFailed,
                message: "what \(identity) holds \(reshape); it could not be kept under the key"
                    + " \(keptOriginalKey), so it is left in its old shape: \(error)",
                key: key, underlying: error)
        }
    }

    func removeKeptOriginal() throws { try store.remove(key: keptOriginalKey) }

    /// Undecodable bytes are copied to a `~corrupt-` key, then removed here only while the key still holds them.
    func keepAside(_ read: ReadBytes, judged: String, type: String, _ decodingError: (any Error)?, key: String)
        -> KeptAside
    {
        let aside = StorageDirectory.movedAsideName(for: storedKey)
        func failure(_ what: String) -> WLStorageError {
            WLStorageError(
                code: .decodingFailed, message: "what \(identity) holds \(judged)" + what, key: key,
                underlying: decodingError)
        }
        do {
            _ = try store.create(key: aside, data: read.data)
            guard try store.remove(key: storedKey, ifItHolds: read.data) else {
                return .changed(failure(", and changes while it is kept aside"))
            }
        } catch {
            return .failed(failure(", and it could not be kept aside: \(error)"))
        }
        forgetVersion()
        return .kept(failure("; it was kept aside under the key \(aside)"))
    }

    func keepCopy(_ data: Data, key: String) throws(WLStorageError) -> String {
        let aside = StorageDirectory.movedAsideName(for: storedKey)
        let created = try Result { try store.create(key: aside, data: data) }
            .mapError { failure($0, writing: true, key: key) }.get()
        if created { return "the key \(aside) of \(identity)" }
        throw WLStorageError(code: .writeFailed, message: "cannot keep a copy aside: \(aside) exists", key: key)
    }

    func failure(_ error: any Error, writing: Bool, key: String) -> WLStorageError {
        if error is WLStorageError { return WLStorageError(wrapping: error, key: key) }
        return WLStorageError(
            code: writing ? .writeFailed : .readFailed,
            message: "\(identity) could not \(writing ? "store" : "read") the value: \(error)", key: key,
            underlying: error)
    }
}
