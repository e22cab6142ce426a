import Synchronization

/// What the registry needs of a cell, whatever its value type.
protocol RegisteredCell: AnyObject, Sendable {
    var fileKey: String? { get }
    func flush()
    /// Reads the file when another program may have changed it, and adopts the new value.
    func checkForExternalChange()
}

/// Every live cell in the process, held weakly: for ``WLStorage/flushAll()``, and so that storages of the same file
/// share one cell.
final class StorageRegistry: Sendable {
    static let shared = StorageRegistry()

    private struct Entry: Sendable {
        weak var cell: (any RegisteredCell)?
    }

    private struct State: Sendable {
        var cells: [ObjectIdentifier: Entry] = [:]
        var files: [String: ObjectIdentifier] = [:]
    }

    enum Lookup<T: Codable & Sendable> {
        case none
        case found(StorageCell<T>)
        /// A live cell of another value type stands for the same file.
        case mismatch(String)
    }

    private let state = Lock(State())

    /// The live cell for `fileKey`, if any.
    func cell<T>(forFile fileKey: String, as type: T.Type) -> Lookup<T> {
        state.withLock { state in
            guard let id = state.files[fileKey], let cell = state.cells[id]?.cell else { return .none }
            return Self.match(cell, as: type)
        }
    }

    /// The live cell of the file at `fileKey`, whatever its value type.
    func cell(forFileKey fileKey: String) -> (any RegisteredCell)? {
        state.withLock { state in state.files[fileKey].flatMap { state.cells[$0]?.cell } }
    }

    /// Registers `cell`. When a live cell of the same file was registered meanwhile, returns that one instead.
    func register<T>(_ cell: StorageCell<T>) -> Lookup<T> {
        state.withLock { state in
            if let fileKey = cell.fileKey {
                if let id = state.files[fileKey], let existing = state.cells[id]?.cell {
                    return Self.match(existing, as: T.self)
                }
                state.files[fileKey] = ObjectIdentifier(cell)
            }
            state.cells[ObjectIdentifier(cell)] = Entry(cell: cell)
            return .none
        }
    }

    func unregister(_ id: ObjectIdentifier, fileKey: String?) {
        state.withLock { state in
            state.cells[id] = nil
            if let fileKey, state.files[fileKey] == id { state.files[fileKey] = nil }
        }
    }

    /// Every live cell.
    func liveCells() -> [any RegisteredCell] {
        state.withLock { state in state.cells.values.compactMap(\.cell) }
    }

    private static func match<T>(_ cell: any RegisteredCell, as type: T.Type) -> Lookup<T> {
        if let typed = cell as? StorageCell<T> { return .found(typed) }
        return .mismatch(String(describing: Swift.type(of: cell)))
    }
}
