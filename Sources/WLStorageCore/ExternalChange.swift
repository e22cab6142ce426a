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
