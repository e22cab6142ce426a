import Foundation

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

/// Where the one backer of a key (``WLStorageDefaultBacker``) keeps its bytes: a directory's file (``FileMedium``) or
/// another store's key (``StoreMedium``). The backer's steps are written once over it; its calls name the key so a
/// file's medium stays small enough to hold inline.
protocol KeyMedium: Sendable {
    /// Where the bytes of `key` are, as messages name it.
    func place(key: String) -> StoredPlace

    /// Whether a default is saved where nothing is stored.
    var savesDefault: Bool { get }

    /// Whether anything stands at the key, even empty bytes (which read as nothing, and a default does not replace).
    func entryExists(key: String) -> Bool

    /// Reads the key. `prepared` says the caller has just prepared a directory, which is then not looked up again.
    func read(key: String, prepared: Bool) -> MediumRead

    /// Reads the key for a check of another program's change.
    func readForCheck(key: String) throws(WLStorageError) -> MediumCheck

    /// Writes `encode()`'s bytes, replacing, or (`replacing` off) only where nothing is; returns the bytes and stamp
    /// written, or `nil` when something stood there. `announced` marks a storage's own write for the file monitor.
    func write(key: String, replacing: Bool, announced: Bool, encode: () throws(WLStorageError) -> Data)
        throws(WLStorageError)
        -> (data: Data, stamp: Int)?

    /// Writes `encode()`'s bytes, the rewrite of an earlier shape, only while the key holds the version read
    /// (`isLast`).
    func rewrite(key: String, announced: Bool, isLast: (Int) -> Bool, encode: () throws(WLStorageError) -> Data) throws
        -> MediumRewrite

    /// Marks `read`, bytes just read and reshaped, as those a rewrite replaces on condition.
    func willRewrite(_ read: ReadBytes)

    /// Keeps `data`, bytes in an earlier shape, until the value is written back; returns why it could not.
    func keepOriginal(_ data: Data, _ reshape: String, key: String) -> WLStorageError?

    /// Removes the bytes kept by ``keepOriginal(_:_:)``.
    func removeKeptOriginal() throws

    /// Keeps `read`, bytes that do not decode as `type` (`judged` says how, `error` why), aside, out of the key's way.
    func keepAside(_ read: ReadBytes, judged: String, type: String, _ error: (any Error)?, key: String) -> KeptAside

    /// Called as the backer goes.
    func release()
}

/// Where a storage follows outside changes, and how the registry knows its cell: a directory's file, or a store's key.
enum MediumSource {
    case file(StorageDirectory, name: String)
    case store(StoreMedium)
    /// No directory, or a key no file can be named for: nothing to follow.
    case none
}
