@testable import WLStorage

/// ``WLStorageSystem/flushAll()`` for the storages of `stores` only: the flush of every cell, with its batches by store,
/// without writing the storages of the tests running beside, which may be keeping a change pending on purpose (a
/// storage of a store of its own that a test flushes only when it chooses, as a test of a wrapped directory store does).
/// A directory store's storages are its files' cells.
public func flushAllStores(_ stores: [any WLStorageStore]) {
    let identities = Set(stores.map(\.identity))
    let directories = Set(stores.compactMap { ($0 as? WLStorageDirectoryStore)?.directory?.path })
    ShutdownHandling.flushEverything(only: { cell in
        cell.storeKey?.store.map(identities.contains) ?? cell.directory.map { directories.contains($0.path) } ?? false
    })
}
