import Foundation
import WLStorageFiles

/// One version of a key's bytes as read: the bytes, their stamp (``KnownVersions``), and a file's identity.
struct ReadBytes {
    let data: Data
    let stamp: Int
    var identity: FileIdentity? = nil
}

/// What became of bytes that do not decode, which a backer tried to keep aside.
enum KeptAside {
    /// Kept, under another name or key; the key holds nothing now.
    case kept(WLStorageError)
    /// The key changed while they were being kept aside: it is read again, or, when it was already, the error says so.
    case changed(WLStorageError)
    /// Not kept: they stay where they are.
    case failed(WLStorageError)
}

/// What a medium's read of its key found, before any decoding.
enum MediumRead {
    /// The key's bytes; `underPreviousKey` when opened with an encrypted store's previous key (to be resealed).
    case bytes(ReadBytes, underPreviousKey: Bool)
    /// Nothing stored (or empty bytes).
    case absent
    /// Not a value of its store at all (plain bytes under an encrypted store): kept aside; the key holds nothing now.
    case keptAside(WLStorageError)
    case failed(WLStorageError)
}

/// What a medium's read for a check of another program's change found.
enum MediumCheck {
    /// Nothing to look at: what was carried is not newer, or no regular file stands at the name.
    case unchanged
    /// The key's bytes, or `nil` for nothing stored.
    case bytes(ReadBytes?)
    /// What the key holds cannot be opened by this program (another key's secret): it is not to be replaced.
    case unreadable(WLStorageError)
}

/// What a rewrite on condition of what was read became.
enum MediumRewrite {
    /// The medium cannot tell: the rewrite is written as a plain write.
    case plain
    /// Another version stands where the bytes read were: nothing was written.
    case gaveWay
    /// Written: the bytes, and the stamp of the version they are now.
    case written(Data, stamp: Int)
}
