import WLStorageFiles

/// A random tag that tells one conditional write from every other: 16 random bytes, as 32 hexadecimal digits.
public struct WLStorageWriteTag: Sendable, Hashable, CustomStringConvertible {
    /// The tag's 32 hexadecimal digits, as a store keeps them.
    public let text: String

    /// The tag written as `text` (a store that read it back).
    public init(text: String) { self.text = text }

    package static func random() -> WLStorageWriteTag {
        var generator = SystemRandomNumberGenerator()
        return WLStorageWriteTag(text: FileName.hex(of: generator.next()) + FileName.hex(of: generator.next()))
    }

    /// The tag's ``text``.
    public var description: String { text }
}

/// What a tagged conditional write did, when known (`WLStorageVersionedStore/write(key:data:ifVersion:tag:)`).
public enum WLStorageTaggedWriteResult: Sendable {
    /// It stored the bytes.
    case stored
    /// The key's version was not the one expected: nothing was stored.
    case refused
    /// Nothing was stored: the write never reached the store, or the store refused it with an error.
    case notStored(WLStorageError)
}

/// The state of a key, seen for a write whose answer was lost (see `WLStorageVersionedStore/trace(of:key:)`).
public struct WLStorageTagTrace: Sendable, Equatable {
    /// The key's version.
    public var version: Int64
    /// Whether the tag asked about is among the tags the key keeps.
    public var tagFound: Bool
    /// How many tags the key keeps now.
    public var tagsKept: Int
    /// How many tags the key keeps at most: a tagged write pushes the oldest out once there are that many.
    public var capacity: Int

    /// A trace of a key at `version` that keeps `tagsKept` of at most `capacity` tags, `tagFound` among them or not.
    public init(version: Int64, tagFound: Bool, tagsKept: Int, capacity: Int) {
        self.version = version
        self.tagFound = tagFound
        self.tagsKept = tagsKept
        self.capacity = capacity
    }

    /// Whether a write tagged with the tag asked about, on condition of `expected` (`nil`: no row), committed; `nil`
    /// when the row cannot tell. A committed write put its tag first and only `capacity` later tagged writes push it
    /// out, so a tag missing short of version `expected + 1 + capacity` was never written.
    package func committed(ifVersion expected: Int64?) -> Bool? {
        if tagFound { return true }
        let ours = (expected ?? 0) &+ 1
        if tagsKept < capacity || version &- ours < Int64(capacity) { return false }
        return nil
    }
}

/// What became of a tagged conditional write, once its outcome was looked for.
enum TaggedWriteOutcome {
    /// It stored the bytes (by answer, or by tag after a lost answer); `overwritten` when others wrote since.
    case stored(overwritten: Bool)
    /// It did not store them, and cannot any more: the update reads again and runs its closure on what it finds.
    case refused
    /// Nothing was stored, and nothing was sent that could be: the store cannot be reached.
    case notStored(WLStorageError)
    /// Unknown: the row was removed, too many writes came after it, or the store could not be asked.
    case unknown(any Error)
}
