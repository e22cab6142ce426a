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
