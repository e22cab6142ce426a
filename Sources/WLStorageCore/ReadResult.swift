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
