import Foundation

/// A store that writes on condition of a key's version rather than its bytes (two replicas' `5 → 6` are the same
/// bytes), and tags each such write, so that ``WLStorage/update(_:)`` is made exactly once across lost connections, and
/// a storage's change whose write lost its answer is not made again over another program's newer change.
///
/// The contract:
/// - Every write of a key gives it a greater version; a key made anew may start again from a small one.
/// - A conditional write compares the version and writes in one step no other write of the key comes between, and
///   keeps its tag among the key's last ``WLStorageTagTrace/capacity`` tags.
/// - What the store says of a tag is true of every write that committed before it was asked.
public protocol WLStorageVersionedStore: WLStorageConditionalStore {
    /// The bytes stored under `key` with their version, or `WLStorageVersionedRead/untagged(_:)` when the store cannot
    /// tag writes now: the update then compares bytes, and reports it.
    func readVersioned(key: String) throws -> WLStorageVersionedRead

    /// Stores `data` under `key`, tagged with `tag`, only while the key's version is `version` (`nil`: nothing
    /// stored), in one step; a store with a feed notifies the change when it wrote.
    ///
    /// - Returns: Whether it stored, or that it knows it did not.
    /// - Throws: When it is not known whether `data` was stored; the update sends the write again, and asks
    ///   ``trace(of:key:)`` once it is refused.
    func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult

    /// The key's version, whether the tag is among its kept tags, and how many it keeps; `nil` when nothing is stored.
    func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace?

    /// Whether ``WLStorageConditionalStore/write(key:data:ifItHolds:)`` finds out by itself, after a lost answer,
    /// whether it stored, and throws only when that cannot be told (as the PostgreSQL and etcd stores do).
    ///
    /// `false` by default: a storage's change, written on condition of what the key holds, then goes through
    /// ``write(key:data:ifVersion:tag:)`` after a read of the key's version (a round trip more), so that a write whose
    /// answer is lost is found made or not by its tag, rather than made again over another program's newer change.
    var settlesLostAnswers: Bool { get }
}

extension WLStorageVersionedStore {
    /// `false`: a storage's changes are written through tagged writes.
    public var settlesLostAnswers: Bool { false }
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
