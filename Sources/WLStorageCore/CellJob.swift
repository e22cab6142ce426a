/// One call of a cell into its backer, outside its lock, one at a time (see ``CellState/busyThread``), taken at a
/// `version`: a write, a default's save unless something is stored by now, a read after a failed one, or a check.
package enum CellJob<T: Sendable>: Sendable {
    case write(T, version: UInt64)
    case createDefault(T, version: UInt64)
    case reread(version: UInt64)
    case check(version: UInt64)

    package var isCreate: Bool { if case .createDefault = self { true } else { false } }
}

package enum ReadResult<T: Sendable>: Sendable {
    case value(T)
    /// A stored value in an earlier shape (``ValueDecoding``), written back when `rewrite` is set; `note` says why not.
    case reshaped(T, rewrite: Bool, note: WLStorageError?)
    case absent
    /// What was stored did not decode and was moved aside: nothing is stored now.
    case movedAside(WLStorageError)
    /// JSON another version stored, which this one cannot read: left until a change of this process replaces it.
    case anotherVersion(WLStorageError)
    /// The read failed; what is stored is unknown.
    case failed(WLStorageError)
}

/// What a check for another program's change found.
package enum ExternalChange<T: Sendable>: Sendable {
    /// Nothing new: the stored version is one the cell wrote or read.
    case unchanged
    /// Another program stored this value, or removed it.
    case changed(T)
    case removed
    /// Another program stored what this one cannot read at all (another key's secret): unknown until readable.
    case unreadable(WLStorageError)
}

package enum JobOutcome<T: Sendable>: Sendable {
    case written
    /// The change was written onto another program's: the key is checked at once, on the same thread.
    case writtenOver
    /// A rewrite on condition found other bytes in place: it is dropped, and the key checked at once.
    case rewriteRefused
    case failed(WLStorageError)
    case created
    /// A read found this (a reread, or a default create that found something stored).
    case read(ReadResult<T>)
    case checked(ExternalChange<T>)
    /// An error to report that leaves the cell as it was (an outside file that does not decode).
    case reported(WLStorageError)
}

/// What a batch of its store's writes takes of a cell, seen from the flushing thread: its change, or why nothing.
package enum BatchTake<Change: Sendable>: Sendable {
    /// The change (its version in the cell's state, then its write), copied out: the cell is busy until the batch ends.
    case taken(Change)
    /// Nothing to write, and no job running.
    case idle
    /// A job of the cell runs on the flushing thread: the flush is called from inside a backer.
    case busyHere
    /// Work the batch does not take: the cell's own flush writes it, or waits for its job.
    case elsewhere
}
