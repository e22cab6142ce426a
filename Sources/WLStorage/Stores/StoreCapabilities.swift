import Foundation

/// What a store can do beyond bytes, found once per store by ``Stores/capabilities(of:)``, the one place a store's
/// type is looked at: the package's wrappers declare theirs; any other store has those of its public protocols.
package struct StoreCapabilities: Sendable {
    /// The store holding a key's bytes through key-changing wrappers, and the key there; `nil` for this store.
    package var resolve: (@Sendable (String) -> (store: any WLStorageStore, key: String))?
    /// The store is a directory: a storage of its key is the key's file, with everything the file backer does.
    package var directory: WLStorageDirectoryStore?
    /// The store encrypts: reads tell a previous key's seal, plain bytes are kept aside, messages never quote bytes.
    package var encrypted: WLStorageEncryptedStore?
    /// The store, as one that writes on condition of the bytes the key holds.
    package var conditional: (any WLStorageConditionalStore)?
    /// The store, as one that writes a rewrite on condition of the key's bytes: a conditional store, or a directory
    /// (whose replace may show the rewrite a moment before giving way: fine for a rewrite, not for an update).
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

    /// Whether the store's values are secret: messages then do not quote the bytes nor carry a decoding error.
    package var conceals: Bool { encrypted != nil }
}

/// A store of the package that declares its capabilities, forwarding those of the store it wraps.
package protocol DeclaresCapabilities: WLStorageStore {
    var capabilities: StoreCapabilities { get }
}

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
    /// Its keys are the wrapped store's, with the prefix, and have its capabilities.
    package var capabilities: StoreCapabilities {
        StoreCapabilities(resolve: { [base, prefix] key in Stores.resolve(base, prefix + key) })
    }
}

/// A store seen as one that offers more: every requirement is the viewed store's; the view's type adds the rest.
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
