import Foundation

/// A store that writes on condition of a key's version rather than of its bytes, and tags each such write, so that an
/// update is made exactly once across lost connections: ``WLStorage/update(_:)`` uses it when a store offers it (the
/// PostgreSQL store does, and an encrypted store over it passes it through), and compares bytes otherwise.
///
/// Bytes are no version: a counter's `5 → 6` written by one replica and by another are the same bytes, so a write
/// judged by reading its key back cannot tell its own from the other's. A version changes with every write, and a tag
/// kept with the key's last writes tells, after an answer was lost, whether this write is among them.
///
/// A store of a program's own offers it by conforming; the storages of its keys find it. The contract:
/// - Every write of a key, plain or conditional, gives it a greater version than it had; a key made anew may start
///   again from a small one.
/// - A conditional write compares the version and writes in one step that no other write of the key can come between,
///   and keeps its tag with the key, among the key's last ``WLStorageTagTrace/capacity`` tags.
/// - What the store says of a tag is true of every write that committed before it was asked.
public protocol WLStorageVersionedStore: WLStorageConditionalStore {
    /// The bytes stored under `key` with their version, or `WLStorageVersionedRead/untagged(_:)` when the store
    /// cannot tag writes now (it lacks what it needs, and may not add it): the update then compares bytes, and reports
    /// it.
    func readVersioned(key: String) throws -> WLStorageVersionedRead

    /// Stores `data` under `key`, tagged with `tag`, only while the key's version is `version` (for `nil`, while
    /// nothing is stored), in one step; a store with a feed notifies the change when it wrote.
    ///
    /// - Returns: Whether it stored, or that it did not and knows it (the write never reached the store, or the store
    ///   refused it).
    /// - Throws: When it is not known whether `data` was stored. The update then sends the same write again, and asks
    ///   ``trace(of:key:)`` once it is refused.
    func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult

    /// What the key says of the write tagged `tag`: its version now, whether the tag is among the tags of its last
    /// writes, and how many tags it keeps; `nil` when nothing is stored.
    func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace?
}

/// What `WLStorageVersionedStore/readVersioned(key:)` found.
public enum WLStorageVersionedRead: Sendable {
    /// The key holds `data`, at `version`.
    case found(Data, version: Int64)
    /// Nothing is stored under the key.
    case absent
    /// The store cannot tag writes; the error says why, and what would let it.
    case untagged(WLStorageError)
}
