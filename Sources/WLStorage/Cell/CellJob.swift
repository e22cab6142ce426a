/// One call of a cell into its backer. A cell runs one at a time (see ``CellState/busyThread``), outside its lock.
enum CellJob<T: Sendable>: Sendable {
    /// Store the local value of this version.
    case write(T, version: UInt64)
    /// Save the default, unless something is stored by now.
    case createDefault(T, version: UInt64)
    /// Read the backer again, because the last read failed. Taken at `version`.
    case reread(version: UInt64)
    /// Read the backer's value if another program changed it. Taken at `version`.
    case check(version: UInt64)
}

/// What a read of the backer found.
enum ReadResult<T: Sendable>: Sendable {
    case value(T)
    /// A stored value in an earlier shape (``ValueDecoding``), written back when `rewrite` is set; `note` says why not.
    case reshaped(T, rewrite: Bool, note: WLStorageError?)
    /// Nothing is stored.
    case absent
    /// What was stored did not decode and was moved aside: nothing is stored now.
    case movedAside(WLStorageError)
    /// JSON another version stored, which this one cannot read: left until a change of this process replaces it.
    case anotherVersion(WLStorageError)
    /// The read failed; what is stored is unknown.
    case failed(WLStorageError)
}

/// What a check for another program's change found.
enum ExternalChange<T: Sendable>: Sendable {
    /// Nothing new: the stored version is one the cell wrote or read.
    case unchanged
    /// Another program stored this value.
    case changed(T)
    /// Another program removed the stored value.
    case removed
    /// Another program stored what this one cannot read at all (another key's secret): unknown until readable.
    case unreadable(WLStorageError)
}

/// How a job ended.
enum JobOutcome<T: Sendable>: Sendable {
    case written
    /// The change was written onto another program's: the key is checked at once, on the same thread.
    case writtenOver
    /// A rewrite on condition found other bytes in place: it is dropped, and the key checked at once.
    case rewriteRefused
    case failed(WLStorageError)
    /// The default was saved.
    case created
    /// A read found this (a reread, or a default create that found something stored).
    case read(ReadResult<T>)
    case checked(ExternalChange<T>)
    /// An error to report that leaves the cell as it was (an outside file that does not decode).
    case reported(WLStorageError)
}
