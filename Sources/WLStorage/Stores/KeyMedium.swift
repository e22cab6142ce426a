import Foundation
import WLStorageFiles

/// Where the one backer of a key (``WLStorageDefaultBacker``) keeps its bytes: a directory's file (``FileMedium``) or
/// another store's key (``StoreMedium``). The backer's steps are written once over it.
protocol KeyMedium: Sendable {
    /// Where the bytes of `key` are, as messages name it.
    func place(key: String) -> StoredPlace

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

    /// Writes `encode()`'s bytes, an earlier shape's rewrite, only while the key holds the version read (`isLast`).
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

    /// Keeps a copy of `data`, undecodable bytes, aside before a write replaces them; returns where, as messages say.
    func keepCopy(_ data: Data, key: String) throws(WLStorageError) -> String
}

/// Where a storage follows outside changes, and how the registry knows its cell: a directory's file, or a store's key.
enum MediumSource {
    case file(StorageDirectory, name: String)
    case store(StoreMedium)
    /// No directory, or a key no file can be named for: nothing to follow.
    case none
}
