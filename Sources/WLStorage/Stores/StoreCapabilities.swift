import Foundation

/// What a store can do beyond reading and writing bytes, which the storages of its keys use: found once per store by
/// ``Stores/capabilities(of:)``, the one place where a store's type is looked at.
///
/// The directory, the key prefix and the encryption declare their capabilities (``DeclaresCapabilities``), forwarding
/// those of the store they wrap; any other store has those of the public protocols its type conforms to
/// (``WLStorageConditionalStore``, `WLStorageVersionedStore`, ``WLStorageCarryingStore``).
package struct StoreCapabilities: Sendable {
    /// The store that holds the bytes of a key, through a wrapper that changes keys, and the key there; `nil` when the
    /// store holds its keys' bytes itself.
    package var resolve: (@Sendable (String) -> (store: any WLStorageStore, key: String))?
    /// The store is a directory: a storage of its key is the key's file, with everything the file backer does.
    package var directory: WLStorageDirectoryStore?
    /// The store encrypts its values: reads tell a value sealed with a previous key, plain bytes are kept aside, and
    /// messages never say what the bytes hold.
    package var encrypted: WLStorageEncryptedStore?
    /// The store, as one that writes on condition of the bytes the key holds.
    package var conditional: (any WLStorageConditionalStore)?
    /// The store, as one that writes the rewrite of a value read on condition of the bytes the key holds: the store
    /// that writes on condition, or a directory, whose conditional replacement may show the rewrite for a moment before
    /// it gives way (acceptable for a rewrite, not for an update).
    package var rewrites: (any WLStorageConditionalStore)?
    /// The store, as one that writes on condition of a version, tagged.
    package var versioned: (any WLStorageVersionedStore)?
    /// The store's feed of changes that carry the bytes stored.
    package var carried: (any CarriedChangeFeed)?

    package init(
        resolve: (@Sendable (String) -> (store: any WLStorageStore, key: String))? = nil,
        directory: WLStorageDirectoryStore? = nil, encrypted: WLStorageEncryptedStore? = nil,
        conditional: (any WLStorageConditionalStore)? = nil, versioned: (any WLStorageVersionedStore)? = nil,
        rewrites: (any WLStorageConditionalStore)? = nil, carried: (any CarriedChangeFeed)? = nil
    ) {
        (self.resolve, self.directory, self.encrypted) = (resolve, directory, encrypted)
        (self.conditional, self.versioned, self.carried) = (versioned ?? conditional, versioned, carried)
        self.rewrites = rewrites ?? self.conditional
    }

    /// Whether the store's values are secret: messages then say that bytes do not decode, not what is wrong in them,
    /// which could quote them, and carry no decoding error.
    package var conceals: Bool { encrypted != nil }
}

/// A store of the package that tells its capabilities itself: the directory, the key prefix and the encryption (each
/// forwarding those of the store it wraps).
package protocol DeclaresCapabilities: WLStorageStore {
    var capabilities: StoreCapabilities { get }
}

/// Where the stores meet the storages.
package enum Stores {
    /// The capabilities of `store`: the only function that looks at a store's type.
    package static func capabilities(of store: any WLStorageStore) -> StoreCapabilities {
        if let declaring = store as? any DeclaresCapabilities { return declaring.capabilities }
        return StoreCapabilities(
            conditional: store as? any WLStorageConditionalStore, versioned: store as? any WLStorageVersionedStore,
            carried: (store as? any WLStorageCarryingStore).map(StoreCarriedFeed.init))
    }

    /// The store that holds the bytes of `key` in `store`, through every key-changing wrapper, and the key there.
    static func resolve(_ store: any WLStorageStore, _ key: String) -> (store: any WLStorageStore, key: String) {
        capabilities(of: store).resolve?(key) ?? (store, key)
    }
}

extension WLStorageDirectoryStore: DeclaresCapabilities {
    package var capabilities: StoreCapabilities {
        StoreCapabilities(directory: self, rewrites: DirectoryRewrites(store: self))
    }
}

extension WLStoragePrefixedStore: DeclaresCapabilities {
    /// Its keys are keys of the store it wraps, with the prefix: storages of them are that store's, with its
    /// capabilities.
    package var capabilities: StoreCapabilities {
        StoreCapabilities(resolve: { [base, prefix] key in Stores.resolve(base, prefix + key) })
    }
}

/// A store seen as one that offers more (writes on condition): every requirement of a store is the viewed store's,
/// and the view's type adds the rest.
protocol StoreView: WLStorageStore {
    var viewed: any WLStorageStore { get }
}

extension StoreView {
    var identity: String { viewed.identity }
    func read(key: String) throws -> Data? { try viewed.read(key: key) }
    func write(key: String, data: Data) throws { try viewed.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try viewed.create(key: key, data: data) }
    func write(_ batch: [WLStorageStoreWrite]) throws { try viewed.write(batch) }
    func remove(key: String) throws { try viewed.remove(key: key) }
    func remove(key: String, ifItHolds data: Data) throws -> Bool { try viewed.remove(key: key, ifItHolds: data) }
    func keys() throws -> [String] { try viewed.keys() }
    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        viewed.observeChanges(changed)
    }
}
