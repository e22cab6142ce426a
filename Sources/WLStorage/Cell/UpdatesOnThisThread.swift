import Foundation

/// The cells whose `update` closure this thread runs, innermost last, per thread (a `pthread` key); a set looks here
/// only while the cell's ``CellState/updaters`` is not zero.
@usableFromInline
enum UpdatesOnThisThread {
    /// The cells of the updates a thread runs, innermost last, and whether it is reporting a refusal.
    private struct Record {
        var cells: [UInt] = []
        var reporting = false
    }

    /// Makes the thread key, once for the process (``Runtime`` keeps it).
    static func makeKey() -> pthread_key_t {
        var key = pthread_key_t()
        let made = pthread_key_create(&key) { pointer in
            guard let record = pointer?.assumingMemoryBound(to: Record.self) else { return }
            record.deinitialize(count: 1)
            record.deallocate()
        }
        precondition(made == 0, "pthread_key_create failed")
        return key
    }

    private static var key: pthread_key_t { Runtime.shared.updatesKey }

    private static var record: UnsafeMutablePointer<Record> {
        if let pointer = pthread_getspecific(key) { return pointer.assumingMemoryBound(to: Record.self) }
        let record = UnsafeMutablePointer<Record>.allocate(capacity: 1)
        record.initialize(to: Record())
        pthread_setspecific(key, record)
        return record
    }

    @usableFromInline
    static func contains(_ cell: ObjectIdentifier) -> Bool { record.pointee.cells.contains(UInt(bitPattern: cell)) }

    /// Records that this thread runs an update of `cell`; `false`, recording nothing, when it runs one already.
    @usableFromInline
    static func begin(_ cell: ObjectIdentifier) -> Bool {
        let record = self.record
        let cell = UInt(bitPattern: cell)
        if record.pointee.cells.contains(cell) { return false }
        record.pointee.cells.append(cell)
        return true
    }

    /// Ends the innermost update that ``begin(_:)`` recorded.
    @usableFromInline
    static func end() { _ = record.pointee.cells.popLast() }

    /// Runs `report` unless this thread is reporting a refusal already, so an error handler repeating it ends.
    static func reportingOnce(_ report: () -> Void) {
        let record = self.record
        guard !record.pointee.reporting else { return }
        record.pointee.reporting = true
        defer { record.pointee.reporting = false }
        report()
    }
}
