import Foundation

/// Where values live: a store reads, writes and removes the bytes stored under a key.
///
/// Storages of the same key in stores with the same ``identity`` share one value in a process. A store is called from
/// background threads, concurrently for different keys, so it does its own locking; for one key a process makes one
/// call at a time. A store that can tell when someone else changed a key offers a feed (``observeChanges(_:)``). See
/// <doc:CustomBackers>.
public protocol WLStorageStore: Sendable {
    /// What the store is, as text: two stores with the same identity hold the same values. It must not contain a
    /// password or other secret; it appears in errors and descriptions.
    var identity: String { get }

    /// The bytes stored under `key`, or `nil` when nothing is stored.
    ///
    /// - Throws: When what is stored cannot be read. The storage starts from the default and writes nothing derived
    ///   from it before a read succeeds.
    func read(key: String) throws -> Data?

    /// Stores `data` under `key`, replacing what was stored.
    ///
    /// - Throws: When nothing was stored. The storage keeps the value pending and writes it again later.
    func write(key: String, data: Data) throws

    /// Stores `data` under `key` unless something is stored there, and returns whether it did: how a default is saved.
    ///
    /// The default implementation reads then writes, which is not atomic; a shared store should do it in one step.
    func create(key: String, data: Data) throws -> Bool

    /// Writes several keys at once, as ``WLStorageSystem/flushAll()`` and the exit flush do.
    ///
    /// When it throws, the batch stays pending, except the first ``WLStorageError/storedWrites`` writes when the error
    /// says how many were stored. The default implementation writes the keys one by one, in order.
    func write(_ batch: [WLStorageStoreWrite]) throws

    /// Removes what is stored under `key`. Removing a key that holds nothing is not an error.
    func remove(key: String) throws

    /// Removes what is stored under `key` only while it is `data`, and returns whether it did: how bytes that do not
    /// decode are removed once kept aside.
    ///
    /// The default implementation is not atomic; a shared store should do it in one step.
    func remove(key: String, ifItHolds data: Data) throws -> Bool

    /// Every key that holds a value.
    func keys() throws -> [String]

    /// Starts telling `changed` when a key's bytes may have been changed by someone else, until the returned
    /// subscription is cancelled or released; `nil` (the default) when the store cannot tell.
    ///
    /// Call `changed` from any thread, outside the store's own locks. A false report costs a read, a missed one leaves
    /// an old value; when changes may have been missed, report ``WLStorageStoreChange/everything``.
    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription?
}

/// A store that replaces a key's bytes on condition in one step, so ``WLStorage/update(_:)`` is atomic across programs.
public protocol WLStorageConditionalStore: WLStorageStore {
    /// Stores `data` under `key` only while the key holds `expected` (`nil`: nothing), and returns whether it did, with
    /// no other write between the comparison and the write. A store with a feed notifies the change when it wrote.
    ///
    /// - Throws: When it is not known whether `data` was stored. The update reads the key back and counts itself made
    ///   when it holds `data`; otherwise it makes its change as a set. A `WLStorageVersionedStore` tells this exactly.
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool

    /// Stores each write of `batch` (distinct keys) only while its key holds the bytes at the same index of `expected`
    /// (`nil`: nothing), as ``write(key:data:ifItHolds:)`` does; returns for each whether it did.
    ///
    /// A flush of every storage writes the changes that go onto others' this way. The default implementation writes
    /// them one by one.
    ///
    /// - Throws: When it is not known which were stored: each is written again on its own, on condition, except those
    ///   past the error's ``WLStorageError/storedWrites``, which were not sent.
    func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool]

    /// The bytes stored under each of `keys` (`nil`: nothing), as ``WLStorageStore/read(key:)`` reads them: how a store
    /// over this one that seals its values (``WLStorageEncryptedStore``) writes a batch on condition of what they hold.
    /// The default implementation reads them one by one.
    ///
    /// - Throws: For a value too large to read, ``WLStorageError/Code/valueTooLarge`` naming its key: the encrypted
    ///   store reads the other keys again without it, and leaves it out of its batch. Any other error (a connection
    ///   lost, a key the store cannot hold) fails the batch: nothing is sent, and no key is read again.
    func read(keys: [String]) throws -> [Data?]
}

extension WLStorageConditionalStore {
    /// Writes the keys on condition one by one, in order; the first failure stops, and says the answers before it.
    public func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
        try writeOneByOne(batch, ifTheyHold: expected)
    }

    /// Reads the keys one by one.
    public func read(keys: [String]) throws -> [Data?] { try keys.map { try read(key: $0) } }

    /// The default ``write(_:ifTheyHold:)``, for a store that writes some batches one by one.
    package func writeOneByOne(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
        var answers: [Bool] = []
        for (write, expected) in zip(batch, expected) {
            do {
                answers.append(try self.write(key: write.key, data: write.data, ifItHolds: expected))
            } catch {
                let unknown = WLStorageError(code: .writeFailed, message: "\(error)", underlying: error)
                var failure = error as? WLStorageError ?? unknown
                (failure.storedWrites, failure.storedAnswers) = (answers.count + 1, answers)
                throw failure
            }
        }
        return answers
    }
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
