import Foundation

/// A change reported by the feed of a ``WLStorageCarryingStore`` with the key's new version, and its bytes when they
/// fit: a storage that knows the version just before adopts them without reading the key.
public struct WLStorageCarriedChange: Sendable, Equatable {
    /// The key, as the store names it.
    public var key: String
    /// The key's version after the change: one more with every write of the key.
    public var version: Int64
    /// The bytes stored by the change, as ``WLStorageStore/read(key:)`` returns them; `nil` when they did not fit in
    /// the report, and the key must be read.
    public var data: Data?

    /// A change of `key` to `version`, which stored `data` (`nil`: not carried).
    public init(key: String, version: Int64, data: Data?) {
        self.key = key
        self.version = version
        self.data = data
    }
}

/// What the feed of a ``WLStorageCarryingStore`` reports: a change to read, as any store's feed reports it, or a
/// carried one.
///
/// A separate type rather than a case of ``WLStorageStoreChange``, which would break every exhaustive `switch` of a
/// program's own store wrapper.
public enum WLStorageFeedEvent: Sendable, Equatable {
    /// A change to read, as ``WLStorageStore/observeChanges(_:)`` reports it.
    case change(WLStorageStoreChange)
    /// A change with its version and, when they fit, its bytes.
    case carried(WLStorageCarriedChange)
}

/// A store whose feed carries each change's version and bytes, so that a storage of the key adopts another program's
/// write without reading the key again (the PostgreSQL store's notifications do).
///
/// The contract:
/// - Each key has a version that every write of it makes one greater (a key made anew may start again from 1), and
///   ``readWithVersion(key:)`` reads the bytes with their version in one step.
/// - The feed reports every write of a key, in the order they were made: carried, with its version and, when they
///   fit, its bytes; or as a change to read.
/// - It reports carried bytes only from writers it trusts: a storage takes them as if it had read the key.
///
/// A storage adopts carried bytes only when the changes reported after the last one at or below the version it knows
/// follow on from that version, one by one, in the order reported, and takes the bytes of the last one. A gap, versions
/// out of order, a version at or below the known one after another change (the key removed and made anew without a
/// report: its versions start again), a change without bytes, or ``WLStorageStoreChange/everything`` makes it read the
/// key. The order of the reports is what tells a key's newest write, not its version.
public protocol WLStorageCarryingStore: WLStorageStore {
    /// Starts the feed, as ``WLStorageStore/observeChanges(_:)`` does, with carried changes reported as such. The
    /// storages of the store call it instead of `observeChanges`.
    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription?

    /// The bytes of `key` with their version, as ``WLStorageStore/read(key:)`` returns them, or `nil` when nothing is
    /// stored.
    func readWithVersion(key: String) throws -> (data: Data, version: Int64)?
}

/// The feed of carried changes a storage uses: a ``WLStorageCarryingStore``'s, or an encrypted store's over one, which
/// opens what it carries.
package protocol CarriedChangeFeed: Sendable {
    /// Starts the feed (see ``WLStorageCarryingStore/observeCarriedChanges(_:)``).
    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription?

    /// The bytes of `key` with their version (see ``WLStorageCarryingStore/readWithVersion(key:)``).
    func readWithVersion(key: String) throws -> (data: Data, version: Int64)?

    /// The bytes a carried change of `key` stands for, as ``WLStorageStore/read(key:)`` would return them: the
    /// carried bytes themselves, or, for an encrypted store, those bytes opened.
    func opened(_ carried: Data, key: String) throws -> Data
}

/// The feed of a store that carries its changes, whose bytes are taken as they are.
struct StoreCarriedFeed: CarriedChangeFeed {
    let store: any WLStorageCarryingStore

    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription? {
        store.observeCarriedChanges(changed)
    }

    func readWithVersion(key: String) throws -> (data: Data, version: Int64)? {
        try store.readWithVersion(key: key)
    }

    func opened(_ carried: Data, key: String) throws -> Data { carried }
}

/// What a store's backer knows of the version of its key and what its feed carried since its last look, to decide
/// whether a check adopts carried bytes or reads the key.
///
/// The rule looks at the changes in the order the feed reported them, which is the order they were made: the last one
/// is the key's newest write. Its bytes are adopted only when the changes after the last one at or below the version
/// the backer knows (read with its bytes, or adopted) follow on from that version, one by one, in that order, up to it.
/// Changes at or below the known version before them are old ones heard late (the feed lags behind a read). When every
/// change carried is the known version, it is stale and changes nothing. Anything else reads the key: no version known
/// (the backer wrote since, or never read with a version), a gap in versions, versions out of order, a change too large
/// to carry, a change reported without a version, a reconnection of the feed, or a version at or below the known one
/// after a newer one or after an older one: the key was removed and made anew without a removal the feed told of (an
/// operator's `DELETE`), and its versions started again, so a version alone no longer says which write it names.
struct CarriedVersions: Sendable {
    /// The version of the bytes the backer last read or adopted; `nil` when unknown.
    var known: Int64?
    /// The carried changes not looked at yet, in the order reported.
    var offered: [WLStorageCarriedChange] = []
    /// A change was reported that must be read.
    var mustRead = false

    /// The most carried changes kept between two checks; past it, the check reads.
    static let limit = 64

    enum Decision: Equatable {
        /// Read the key.
        case read
        /// Nothing newer than what the backer knows was carried.
        case stale
        /// Take these bytes, of this version.
        case adopt(Data, version: Int64)
    }

    mutating func offer(_ changes: [WLStorageCarriedChange], mustRead: Bool) {
        if mustRead { self.mustRead = true }
        offered += changes
        if offered.count > Self.limit {
            offered = []
            self.mustRead = true
        }
    }

    /// Decides what a check does, and forgets what was offered.
    mutating func take() -> Decision {
        defer {
            offered = []
            mustRead = false
        }
        guard !mustRead, let known, let newest = offered.last else { return .read }
        // The changes the backer has not seen: those after the last one at or below the version it knows.
        let unseen = offered[(offered.lastIndex { $0.version <= known }.map { $0 + 1 } ?? 0)...]
        guard !unseen.isEmpty else {
            // Only the known version, heard again, is stale; older versions after it, or alone, say the key was made
            // anew (or replayed): the key is read.
            return offered.allSatisfy { $0.version == known } ? .stale : .read
        }
        for (offset, change) in unseen.enumerated() where change.version != known &+ Int64(offset) &+ 1 {
            return .read
        }
        guard let data = newest.data else { return .read }
        return .adopt(data, version: newest.version)
    }
}
