/// A file, by its directory and its name in it. The directory's path string is shared by every file in it.
package struct FileKey: Hashable, Sendable {
    package let directory: String
    package let name: String
}

/// What the registry needs of a cell, whatever its value type.
protocol RegisteredCell: AnyObject, Sendable {
    var fileKey: FileKey? { get }
    func flush()
    /// Reads the file when another program may have changed it, and adopts the new value.
    func checkForExternalChange()
}

/// Every live cell in the process, held weakly: for ``WLStorage/flushAll()``, for the file monitor, and so that
/// storages of the same file share one cell.
final class StorageRegistry: Sendable {
    static let shared = StorageRegistry()

    /// A file-backed cell is found by its file; any other by its identity.
    private enum Key: Hashable {
        case file(FileKey)
        case object(ObjectIdentifier)
    }

    private struct Entry: Sendable {
        weak var cell: (any RegisteredCell)?
        let id: ObjectIdentifier
    }

    enum Lookup<T: Codable & Sendable> {
        case none
        case found(StorageCell<T>)
        /// A live cell of another value type stands for the same file.
        case mismatch(String)
    }

    private let entries = Lock<[Key: Entry]>([:])

    /// The live cell of `fileKey`, if any, as a cell of `T`.
    func cell<T>(forFile fileKey: FileKey, as type: T.Type) -> Lookup<T> {
        guard let cell = cell(forFileKey: fileKey) else { return .none }
        return Self.match(cell, as: type)
    }

    /// The live cell of `fileKey`, whatever its value type.
    func cell(forFileKey fileKey: FileKey) -> (any RegisteredCell)? {
        entries.withLock { $0[.file(fileKey)]?.cell }
    }

    /// Registers `cell`. When a live cell of the same file was registered meanwhile, returns that one instead.
    func register<T>(_ cell: StorageCell<T>) -> Lookup<T> {
        let id = ObjectIdentifier(cell)
        let key = cell.fileKey.map(Key.file) ?? .object(id)
        let existing = entries.withLock { entries -> (any RegisteredCell)? in
            if let existing = entries[key]?.cell { return existing }
            entries[key] = Entry(cell: cell, id: id)
            return nil
        }
        return existing.map { Self.match($0, as: T.self) } ?? .none
    }

    func unregister(_ id: ObjectIdentifier, fileKey: FileKey?) {
        let key = fileKey.map(Key.file) ?? .object(id)
        entries.withLock { entries in
            if entries[key]?.id == id { entries[key] = nil }
        }
    }

    /// Every live cell.
    func liveCells() -> [any RegisteredCell] {
        entries.withLock { entries in entries.values.compactMap(\.cell) }
    }

    private static func match<T>(_ cell: any RegisteredCell, as type: T.Type) -> Lookup<T> {
        if let typed = cell as? StorageCell<T> { return .found(typed) }
        return .mismatch(String(describing: Swift.type(of: cell)))
    }
}
