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
