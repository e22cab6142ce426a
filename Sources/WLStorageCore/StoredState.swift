/// What a cell knows of the value its backer holds.
@usableFromInline
package enum StoredState: UInt8, Sendable {
    /// The backer's value was read, written, or found absent: the cell's value may replace it.
    case known
    /// Nothing is stored, and the default has not been saved yet; any value found stored wins over it.
    case defaultUnsaved
    /// The last read failed: what is stored is unknown, and must not be replaced until read.
    case unknown
}
