import Foundation
import Observation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The migrations of the cells that have some: a table rather than a field, so that cells stay small.
enum CellMigrations {
    private static let table = Lock<[ObjectIdentifier: any Sendable]>([:])
    private static let count = Atomic<Int>(0)

    /// Adds `migrations` after those `cell` has (a storage joining the cell of another brings its own).
    static func add<M: Sendable>(_ migrations: [M], to cell: AnyObject) {
        guard !migrations.isEmpty else { return }
        let replaced = table.withLock { table -> (any Sendable)? in
            let existing = table[ObjectIdentifier(cell)]
            if existing == nil { count.add(1, ordering: .relaxed) }
            table[ObjectIdentifier(cell)] = ((existing as? [M]) ?? []) + migrations
            return existing
        }
        _ = replaced  // released after the lock: a migration's closure may hold user objects
    }

    static func migrations<M>(of cell: AnyObject, as type: M.Type) -> [M] {
        guard count.load(ordering: .relaxed) > 0 else { return [] }
        return table.withLock { $0[ObjectIdentifier(cell)] } as? [M] ?? []
    }

    /// Called as a cell goes: its identifier may be reused by another object.
    static func forget(_ cell: AnyObject) {
        guard count.load(ordering: .relaxed) > 0 else { return }
        let removed = table.withLock { table in
            let removed = table.removeValue(forKey: ObjectIdentifier(cell))
            if removed != nil { count.subtract(1, ordering: .relaxed) }
            return removed
        }
        _ = removed  // released after the lock: a migration's closure may hold user objects
    }
}
