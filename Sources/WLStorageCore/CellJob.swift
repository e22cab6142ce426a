/// One call of a cell into its backer, outside its lock, one at a time (see ``CellState/busyThread``), taken at a
/// `version`: a write, a default's save unless something is stored by now, a read after a failed one, or a check.
package enum CellJob<T: Sendable>: Sendable {
    case write(T, version: UInt64)
    case createDefault(T, version: UInt64)
    case reread(version: UInt64)
    case check(version: UInt64)

    package var isCreate: Bool { if case .createDefault = self { true } else { false } }
}
