import Foundation

/// A store that keeps its keys in another store with a prefix (`store.prefixed("billing.")` keeps `"limit"` as
/// `"billing.limit"`), passing every capability through, its identity too.
public struct WLStoragePrefixedStore<Base: WLStorageStore>: WLStorageStore {
    /// The store the keys are kept in.
    public let base: Base
    /// What every key is prefixed with.
    public let prefix: String

    /// Creates a store of the keys of `base` that start with `prefix`.
    public init(base: Base, prefix: String) {
        self.base = base
        self.prefix = prefix
    }

    /// The identity of the store it wraps: a prefixed key is a key of that store.
    public var identity: String { base.identity }

    public func read(key: String) throws -> Data? { try base.read(key: prefix + key) }

    public func write(key: String, data: Data) throws { try base.write(key: prefix + key, data: data) }

    public func create(key: String, data: Data) throws -> Bool { try base.create(key: prefix + key, data: data) }

    public func write(_ batch: [WLStorageStoreWrite]) throws {
        try base.write(batch.map { WLStorageStoreWrite(key: prefix + $0.key, data: $0.data) })
    }

    public func remove(key: String) throws { try base.remove(key: prefix + key) }

    public func remove(key: String, ifItHolds data: Data) throws -> Bool {
        try base.remove(key: prefix + key, ifItHolds: data)
    }

    /// The keys of the wrapped store that start with the prefix, without it.
    public func keys() throws -> [String] {
        try base.keys().compactMap { $0.hasPrefix(prefix) ? String($0.dropFirst(prefix.count)) : nil }
    }

    /// The wrapped store's feed, with the keys that have the prefix, without it.
    public func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription?
    {
        let prefix = self.prefix
        return base.observeChanges { change in
            switch change {
            case .key(let key) where key.hasPrefix(prefix): changed(.key(String(key.dropFirst(prefix.count))))
            case .key: break
            case .everything: changed(.everything)
            }
        }
    }
}

extension WLStorageStore {
    /// This store, with every key prefixed by `prefix`.
    public func prefixed(_ prefix: String) -> WLStoragePrefixedStore<Self> {
        WLStoragePrefixedStore(base: self, prefix: prefix)
    }
}

extension WLStorageStore where Self == WLStoragePrefixedStore<WLStorageDirectoryStore> {
    /// The default directory, with every key prefixed by `prefix`.
    public static func prefix(_ prefix: String) -> WLStoragePrefixedStore<WLStorageDirectoryStore> {
        WLStorageDirectoryStore.standard.prefixed(prefix)
    }
}
