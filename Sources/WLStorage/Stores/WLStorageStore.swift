import Foundation

/// Where values live: a store reads, writes and removes the bytes stored under a key.
///
/// A store works in bytes; the storage encodes its value on top (as JSON, the same bytes the file store writes).
/// Storages of the same key in stores with the same ``identity`` share one value in a process, whatever store
/// they were created with.
///
/// ``WLStorage`` calls a store from background threads, from several at once for different keys (and for the same
/// key from several programs or machines): a store does its own locking. Only the storage's own job calls it for a
/// given key in a process, one call at a time.
///
/// A store that can tell when another program or machine changed a key offers a feed of such changes
/// (``observeChanges(_:)``); the storage then reads the key and adopts the value by the same rule as a file changed by
/// another program: the value stored last wins, and a local change still pending wins over it.
///
/// ```swift
/// final class MemoryStore: WLStorageStore {
///     // Unique per instance: two stores with one identity are taken to hold the same values.
///     let identity = "memory:" + UUID().uuidString
///     private let values = Mutex<[String: Data]>([:])
///     func read(key: String) -> Data? { values.withLock { $0[key] } }
///     func write(key: String, data: Data) { values.withLock { $0[key] = data } }
///     func remove(key: String) { values.withLock { $0[key] = nil } }
///     func keys() -> [String] { values.withLock { Array($0.keys) } }
/// }
/// ```
public protocol WLStorageStore: Sendable {
    /// What the store is, as text: two stores with the same identity hold the same values. It must not contain a
    /// password or other secret; it appears in errors and descriptions.
    var identity: String { get }

    /// The bytes stored under `key`, or `nil` when nothing is stored.
    ///
    /// - Throws: When what is stored cannot be read. The storage then starts from the default, and never writes
    ///   anything derived from it before it has read the key successfully.
    func read(key: String) throws -> Data?

    /// Stores `data` under `key`, replacing what was stored.
    ///
    /// - Throws: When nothing was stored. The storage keeps the value pending and writes it again later.
    func write(key: String, data: Data) throws

    /// Stores `data` under `key` unless something is stored there already, and returns whether it did. The storage
    /// saves a default value this way: a default never replaces a stored value.
    ///
    /// The default implementation reads the key and writes when nothing is stored, which can replace a value stored
    /// in between by another program; a store shared by several programs should do it in one step.
    func create(key: String, data: Data) throws -> Bool

    /// Writes several keys at once: ``WLStorageSystem/flushAll()`` and the flush at exit hand a store all of its pending
    /// values together. When it throws, every value of the batch stays pending and is written again later, except the
    /// first ``WLStorageError/storedWrites`` writes when the error is a ``WLStorageError`` that says how many were
    /// stored: a store that stores a batch in parts tells which parts it stored, so that a deadline never turns stored
    /// values into failed ones.
    ///
    /// The default implementation writes the keys one by one, in order, and its error says how many it wrote; a
    /// database writes many rows per statement.
    func write(_ batch: [WLStorageStoreWrite]) throws

    /// Removes what is stored under `key`. Removing a key that holds nothing is not an error.
    func remove(key: String) throws

    /// Removes what is stored under `key` only while it is `data`, and returns whether it did. The storage removes
    /// bytes that do not decode this way, once it has kept a copy of them under another key: what someone stored
    /// meanwhile is not removed.
    ///
    /// The default implementation reads the key, compares and removes, which can remove a value stored in between by
    /// another program; a store shared by several programs should do it in one step.
    func remove(key: String, ifItHolds data: Data) throws -> Bool

    /// Every key that holds a value.
    func keys() throws -> [String]

    /// Starts telling `changed` when a key's stored bytes may have been changed by someone else (another program,
    /// another machine), until the returned observation is cancelled or released. `nil` when the store cannot tell;
    /// that is the default.
    ///
    /// Call `changed` from any thread, outside the store's own locks. Reporting a change that was not one, or the
    /// store's own write, costs one read of the key; missing one leaves the storage with an old value until the next
    /// change. When the store may have missed changes (a lost connection), report ``WLStorageStoreChange/everything``.
    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription?
}

/// A store that can replace a key's bytes on condition, in one step that no other program or machine sharing the store
/// can come between: ``WLStorage/update(_:)`` of a storage in it is atomic across all of them, not only within one
/// process.
///
/// The update reads the key, runs its closure on the value, and stores the result only while the key still holds
/// what it read; when someone changed it meanwhile, it reads again and runs the closure again.
public protocol WLStorageConditionalStore: WLStorageStore {
    /// Stores `data` under `key` only while the key holds `expected`, or nothing when `expected` is `nil`, and returns
    /// whether it did. No other write to the key, from any program sharing the store, may come between the comparison
    /// and the write. A store with a feed notifies the change when it wrote.
    ///
    /// - Throws: When it is not known whether `data` was stored. The update then reads the key back and counts itself
    ///   made when it holds `data` (which another program's write of the same bytes also makes true: bytes are no
    ///   version); otherwise it makes its change in the process only, as a set, to be written when the store can be
    ///   reached. A store that also conforms to `WLStorageVersionedStore` (the PostgreSQL store does) writes on
    ///   condition of a version instead, and tags its writes, so that a lost answer is told exactly.
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool
}

/// One key's bytes, to be written with others by ``WLStorageStore/write(_:)``.
public struct WLStorageStoreWrite: Sendable {
    /// The key.
    public var key: String
    /// The bytes to store under it.
    public var data: Data

    /// Creates a write of `data` under `key`.
    public init(key: String, data: Data) {
        self.key = key
        self.data = data
    }
}

/// What a store's feed reports (see ``WLStorageStore/observeChanges(_:)``).
public enum WLStorageStoreChange: Sendable, Equatable {
    /// The bytes stored under this key may have changed.
    case key(String)
    /// Any key may have changed: every storage of the store reads its key again.
    case everything
}

/// A feed of a store's changes: the same class as a storage's change handler, under its earlier name.
@available(*, deprecated, renamed: "WLStorageSubscription")
public typealias WLStorageObservation = WLStorageSubscription

extension WLStorageStore {
    /// Reads `key`, and writes `data` when nothing is stored. Not atomic: see the requirement.
    public func create(key: String, data: Data) throws -> Bool {
        guard try read(key: key) == nil else { return false }
        try write(key: key, data: data)
        return true
    }

    /// Reads `key`, and removes it when it holds `data`. Not atomic: see the requirement.
    public func remove(key: String, ifItHolds data: Data) throws -> Bool {
        guard try read(key: key) == data else { return false }
        try remove(key: key)
        return true
    }

    /// Writes the keys one by one; the first failure stops, leaving the keys before it written.
    public func write(_ batch: [WLStorageStoreWrite]) throws {
        for (index, write) in batch.enumerated() {
            do {
                try self.write(key: write.key, data: write.data)
            } catch var error as WLStorageError {
                error.storedWrites = index
                throw error
            }
        }
    }

    /// No feed: `nil`.
    public func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription?
    {
        nil
    }
}
