import Foundation

/// A change reported by a ``WLStorageCarryingStore``'s feed with the key's new version, and its bytes when they fit.
public struct WLStorageCarriedChange: Sendable, Equatable {
    /// The key, as the store names it.
    public var key: String
    /// The key's version after the change: one more with every write of the key.
    public var version: Int64
    /// The bytes stored by the change, as ``WLStorageStore/read(key:)`` returns them; `nil` when not carried.
    public var data: Data?

    /// A change of `key` to `version`, which stored `data` (`nil`: not carried).
    public init(key: String, version: Int64, data: Data?) {
        self.key = key
        self.version = version
        self.data = data
    }
}

/// What the feed of a ``WLStorageCarryingStore`` reports: a change to read, or a carried one (a case of
/// ``WLStorageStoreChange`` would break programs' exhaustive switches).
public enum WLStorageFeedEvent: Sendable, Equatable {
    /// A change to read, as ``WLStorageStore/observeChanges(_:)`` reports it.
    case change(WLStorageStoreChange)
    /// A change with its version and, when they fit, its bytes.
    case carried(WLStorageCarriedChange)
}

/// A store whose feed carries each change's version and bytes, so a storage adopts another program's write without
/// reading the key.
///
/// The contract:
/// - Every write of a key makes its version one greater (a key made anew may start again from 1), and
///   ``readWithVersion(key:)`` reads bytes and version in one step.
/// - The feed reports every write of a key, in order: carried (version, and bytes when they fit), or to read.
/// - It carries bytes only from writers it trusts: a storage takes them as if it had read the key.
public protocol WLStorageCarryingStore: WLStorageStore {
    /// Starts the feed with carried changes reported as such; storages call it instead of `observeChanges`.
    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription?

    /// The bytes of `key` with their version, or `nil` when nothing is stored.
    func readWithVersion(key: String) throws -> (data: Data, version: Int64)?

    /// As ``WLStorageStore/write(key:data:)``, returning the key's new version, or `nil` (the default).
    func writeWithVersion(key: String, data: Data) throws -> Int64?
}

extension WLStorageCarryingStore {
    public func writeWithVersion(key: String, data: Data) throws -> Int64? {
        try write(key: key, data: data)
        return nil
    }
}

/// The carried feed a storage uses: a ``WLStorageCarryingStore``'s, or an encrypted store's over one.
package protocol CarriedChangeFeed: Sendable {
    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription?

    func readWithVersion(key: String) throws -> (data: Data, version: Int64)?

    /// The bytes a carried change of `key` stands for: the carried bytes, or for an encrypted store, those opened.
    func opened(_ carried: Data, key: String) throws -> Data
}

/// The feed of a store that carries its changes, whose bytes are taken as they are.
struct StoreCarriedFeed: CarriedChangeFeed {
    let store: any WLStorageCarryingStore

    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription? {
        store.observeCarriedChanges(changed)
    }

    func readWithVersion(key: String) throws -> (data: Data, version: Int64)? { try store.readWithVersion(key: key) }

    func opened(_ carried: Data, key: String) throws -> Data { carried }
}

/// What a store's backer knows of its key's version and what its feed carried since (in write order), to decide whether
/// a check adopts carried bytes or reads the key. Bytes are adopted only when the changes after the last one at or
/// below the known version follow on from it one by one; earlier ones are old news. Anything else reads: no known
/// version, a gap, disorder, no bytes, a reconnection, a lower version after another (the key made anew), or the known
/// version with other bytes. The known version heard last with the known bytes is stale.
struct CarriedVersions: Sendable {
    /// The version of the bytes the backer last read, adopted or wrote; `nil` when unknown.
    var known: Int64?
    /// The bytes of the known version as the feed carries them, when the backer has them at hand; `nil` when not.
    var knownBytes: Data?
    /// The carried changes not looked at yet, in the order reported.
    var offered: [WLStorageCarriedChange] = []
    var mustRead = false

    /// The most carried changes kept between two checks; past it, the check reads.
    static let limit = 64

    enum Decision: Equatable {
        case read
        /// Nothing newer than what the backer knows was carried.
        case stale
        case adopt(Data, version: Int64)
    }

    /// Knows `version` (`nil`: none), whose bytes as the feed carries them are `bytes` (`nil`: not at hand).
    mutating func know(_ version: Int64?, bytes: Data?) {
        known = version
        knownBytes = version == nil ? nil : bytes
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
        let unseen = offered[(offered.lastIndex { $0.version <= known }.map { $0 + 1 } ?? 0)...]
        guard !unseen.isEmpty else {
            // The newest write is the known version with the bytes known: whatever came before it is old news.
            if newest.version == known, let knownBytes, newest.data == knownBytes { return .stale }
            // Heard again: the known version, with the bytes known when both are at hand.
            let heardAgain = offered.allSatisfy { change in
                change.version == known && (knownBytes == nil || change.data == nil || change.data == knownBytes)
            }
            return heardAgain ? .stale : .read
        }
        guard unseen.enumerated().allSatisfy({ offset, change in change.version == known &+ Int64(offset) &+ 1 }),
            let data = newest.data
        else { return .read }
        return .adopt(data, version: newest.version)
    }
}
