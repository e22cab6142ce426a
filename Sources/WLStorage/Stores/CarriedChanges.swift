import Foundation

/// A change whose notification carries the key's new version, and its bytes when they fit: a replica adopts them
/// without reading the key, when it knows the version just before.
///
/// Which stores carry their changes is a capability of the core (``StoreCapabilities/carried``), not a case of the
/// public ``WLStorageStoreChange``, which would break every exhaustive `switch` of a program's own store wrapper.
package struct CarriedChange: Sendable, Equatable {
    /// The key, as the store's feed names it.
    package var key: String
    /// The key's version after the change: one more with every write of the key.
    package var version: Int64
    /// The bytes stored by the change, as the store holds them (sealed, in a store under an encrypted one); `nil` when
    /// they did not fit in the notification, and the key must be read.
    package var data: Data?

    package init(key: String, version: Int64, data: Data?) {
        self.key = key
        self.version = version
        self.data = data
    }
}

/// What a feed that carries changes reports: a change to read, as any store reports it, or a carried one.
package enum StoreFeedEvent: Sendable, Equatable {
    case change(WLStorageStoreChange)
    case carried(CarriedChange)
}

/// The feed of a store whose notifications carry versions and bytes, and what a replica needs to use them.
package protocol CarriedChangeFeed: Sendable {
    /// Starts the feed, as ``WLStorageStore/observeChanges(_:)`` does, with carried changes reported as such.
    func observeCarriedChanges(_ changed: @escaping @Sendable (StoreFeedEvent) -> Void) -> WLStorageSubscription?

    /// The bytes of `key` with their version (as ``WLStorageStore/read(key:)`` returns them), or `nil` when nothing
    /// is stored.
    func readWithVersion(key: String) throws -> (data: Data, version: Int64)?

    /// The bytes a carried change of `key` stands for, as ``WLStorageStore/read(key:)`` would return them: the
    /// carried bytes themselves, or, for an encrypted store, those bytes opened.
    func opened(_ carried: Data, key: String) throws -> Data
}

/// What a store's backer knows of the version of its key and what its feed carried since its last look, to decide
/// whether a check adopts carried bytes or reads the key.
///
/// The rule: carried bytes are adopted only when their versions follow on, one by one, from the version the backer
/// knows (read with its bytes, or adopted), up to the newest carried. When the newest carried is the known version, it
/// is stale and changes nothing. Anything else reads the key: no version known (the backer wrote since, or never read
/// with a version), a gap in versions, a change too large to carry, a change reported without a version, a
/// reconnection of the feed, or versions all older than the known one: the key was removed and made anew without a
/// removal the feed told of (an operator's `DELETE`), and its versions started again.
struct CarriedVersions: Sendable {
    /// The version of the bytes the backer last read or adopted; `nil` when unknown.
    var known: Int64?
    /// The carried changes not looked at yet, by version.
    var offered: [Int64: Data?] = [:]
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

    mutating func offer(_ changes: [CarriedChange], mustRead: Bool) {
        if mustRead { self.mustRead = true }
        for change in changes { offered[change.version] = change.data }
        if offered.count > Self.limit {
            offered = [:]
            self.mustRead = true
        }
    }

    /// Decides what a check does, and forgets what was offered.
    mutating func take() -> Decision {
        defer {
            offered = [:]
            mustRead = false
        }
        guard !mustRead, let known, !offered.isEmpty else { return .read }
        if offered.count == 1, let (version, data) = offered.first {
            if version == known { return .stale }
            guard version == known &+ 1, let data else { return .read }
            return .adopt(data, version: version)
        }
        let newer = offered.filter { $0.key > known }
        guard let newest = newer.keys.max() else { return offered[known] != nil ? .stale : .read }
        var version = known
        while newer[version &+ 1] != nil { version &+= 1 }
        guard version == newest, let data = newer[newest] ?? nil else { return .read }
        return .adopt(data, version: newest)
    }
}
