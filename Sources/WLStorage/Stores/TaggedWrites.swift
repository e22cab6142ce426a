import Foundation

/// A store that writes on condition of a key's version rather than of its bytes, and tags each such write, so that an
/// update is made exactly once across lost connections: ``WLStorage/update(_:)`` uses it when a store offers it (the
/// PostgreSQL store does, and an encrypted store over it passes it through), and compares bytes otherwise.
///
/// Bytes are no version: a counter's `5 → 6` written by one replica and by another are the same bytes, so a write
/// judged by reading its key back cannot tell its own from the other's. A version changes with every write, and a tag
/// kept with the key's last writes tells, after an answer was lost, whether this write is among them.
package protocol VersionedConditionalStore: WLStorageConditionalStore {
    /// The bytes stored under `key` with their version, or ``VersionedRead/untagged(_:)`` when the store cannot tag
    /// writes (its table lacks what it needs, and may not be changed): the update then compares bytes, and reports it.
    func readVersioned(key: String) throws -> VersionedRead

    /// Stores `data` under `key`, tagged with `tag`, only while the key's version is `version` (for `nil`, while
    /// nothing is stored), in one step; notifies the change when it wrote.
    ///
    /// - Returns: Whether it stored, or that it did not and knows it (the statement never reached the store, or the
    ///   store refused it).
    /// - Throws: When it is not known whether `data` was stored.
    func write(key: String, data: Data, ifVersion version: Int64?, tag: WriteTag) throws -> TaggedWriteResult

    /// What the key's row says of the write tagged `tag`: its version, whether the tag is among the tags of its last
    /// writes, and how many of them it keeps; `nil` when nothing is stored.
    func trace(of tag: WriteTag, key: String) throws -> TagTrace?
}

/// A random tag that tells one conditional write from every other: 16 random bytes, as 32 hexadecimal digits.
package struct WriteTag: Sendable, Hashable, CustomStringConvertible {
    package let text: String

    package init(text: String) {
        self.text = text
    }

    /// A new tag, from two random `UInt64`s (one `getrandom` each at most, not one per byte).
    package static func random() -> WriteTag {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next()
        let low = generator.next()
        let digits = String(high, radix: 16)
        let lowDigits = String(low, radix: 16)
        return WriteTag(
            text: String(repeating: "0", count: 16 - digits.count) + digits
                + String(repeating: "0", count: 16 - lowDigits.count) + lowDigits)
    }

    package var description: String { text }
}

/// What ``VersionedConditionalStore/readVersioned(key:)`` found.
package enum VersionedRead: Sendable {
    /// The key holds `data`, at `version`.
    case found(Data, version: Int64)
    /// Nothing is stored under the key.
    case absent
    /// The store cannot tag writes; the error says why, and what would let it.
    case untagged(WLStorageError)
}

/// What a tagged conditional write did, when that is known.
package enum TaggedWriteResult: Sendable {
    /// It stored the bytes.
    case stored
    /// The key's version was not the one expected: nothing was stored.
    case refused
    /// Nothing was stored: the statement never reached the store, or the store refused it with an error.
    case notStored(WLStorageError)
}

/// The state of a key's row, seen for a write whose answer was lost (see
/// ``VersionedConditionalStore/trace(of:key:)``).
package struct TagTrace: Sendable, Equatable {
    /// The row's version.
    package var version: Int64
    /// Whether the tag asked about is among the tags the row keeps.
    package var tagFound: Bool
    /// How many tags the row keeps now, and at most: a tagged write pushes the oldest out once there are `capacity`.
    package var tagsKept: Int
    package var capacity: Int

    package init(version: Int64, tagFound: Bool, tagsKept: Int, capacity: Int) {
        self.version = version
        self.tagFound = tagFound
        self.tagsKept = tagsKept
        self.capacity = capacity
    }

    /// Whether a write tagged with the tag asked about, on condition of `expected` (`nil`: no row), committed: `true`
    /// or `false` when the row tells, `nil` when it cannot.
    ///
    /// Committed, the write made the version `expected + 1` (1 for a new row) and put its tag first; every later
    /// tagged write adds one to the version and one tag, so the tag can have been pushed out only by `capacity` later
    /// writes, and then the version is at least `expected + 1 + capacity` and the row keeps `capacity` tags. Short of
    /// that, a tag not found was never written. (Plain writes add to the version and leave the tags: they only make
    /// the check more cautious.)
    package func committed(ifVersion expected: Int64?) -> Bool? {
        if tagFound { return true }
        let ours = (expected ?? 0) &+ 1
        if tagsKept < capacity || version &- ours < Int64(capacity) { return false }
        return nil
    }
}

/// What became of a tagged conditional write, once its outcome was looked for.
enum TaggedWriteOutcome {
    /// It stored the bytes (known from its answer, or from its tag in the row after the answer was lost);
    /// `overwritten` when others wrote the key after it.
    case stored(overwritten: Bool)
    /// It did not store them, and cannot any more: the update reads again and runs its closure on what it finds.
    case refused
    /// Nothing was stored, and nothing was sent that could be: the store cannot be reached.
    case notStored(WLStorageError)
    /// Whether it stored them is not known: the row was removed, too many writes came after it, or the store could
    /// not be asked.
    case unknown(any Error)
}
