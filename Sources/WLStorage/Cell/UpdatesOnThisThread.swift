import Foundation

/// The cells whose `update` closure this thread runs, innermost last, per thread (a `pthread` key); a set looks here
/// only while the cell's ``CellState/updaters`` is not zero.
@usableFromInline
enum UpdatesOnThisThread {
    /// The cells of the updates a thread runs, innermost last, and whether it is reporting a refusal.
    private struct Record {
        var depth = 0
        var capacity = 0
        var cells: UnsafeMutablePointer<UInt>?
        var reporting = false

        func contains(_ cell: UInt) -> Bool { UnsafeBufferPointer(start: cells, count: depth).contains(cell) }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let made = pthread_key_create(&key) { pointer in
            guard let record = pointer?.assumingMemoryBound(to: Record.self) else { return }
            record.pointee.cells?.deallocate()
            record.deinitialize(count: 1)
            record.deallocate()
        }
        precondition(made == 0, "pthread_key_create failed")
        return key
    }()

    private static var record: UnsafeMutablePointer<Record> {
        if let pointer = pthread_getspecific(key) { return pointer.assumingMemoryBound(to: Record.self) }
        let record = UnsafeMutablePointer<Record>.allocate(capacity: 1)
        record.initialize(to: Record())
        pthread_setspecific(key, record)
        return record
    }

    @usableFromInline
    static func contains(_ cell: ObjectIdentifier) -> Bool {
        record.pointee.contains(UInt(bitPattern: cell))
    }

    /// Records that this thread runs an update of `cell`; `false`, recording nothing, when it runs one already.
    @usableFromInline
    static func begin(_ cell: ObjectIdentifier) -> Bool {
        let record = self.record
        let cell = UInt(bitPattern: cell)
        if record.pointee.contains(cell) { return false }
        if record.pointee.depth == record.pointee.capacity {
            let capacity = max(8, record.pointee.capacity * 2)
            let cells = UnsafeMutablePointer<UInt>.allocate(capacity: capacity)
            if let old = record.pointee.cells {
                cells.initialize(from: old, count: record.pointee.depth)
                old.deallocate()
            }
            record.pointee.cells = cells
            record.pointee.capacity = capacity
        }
        record.pointee.cells![record.pointee.depth] = cell
        record.pointee.depth += 1
        return true
    }

    /// Ends the innermost update that ``begin(_:)`` recorded.
    @usableFromInline
    static func end() {
        if record.pointee.depth > 0 { record.pointee.depth -= 1 }
    }

    /// Runs `report` unless this thread is reporting a refusal already, so an error handler repeating it ends.
    static func reportingOnce(_ report: () -> Void) {
        let record = self.record
        guard !record.pointee.reporting else { return }
        record.pointee.reporting = true
        defer { record.pointee.reporting = false }
        report()
    }
}
