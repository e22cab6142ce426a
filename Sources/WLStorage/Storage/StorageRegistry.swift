import Foundation
import WLStorageFiles

/// What a cell is registered by: a directory's file (device and inode, or path), or another store's key.
package struct CellKey: Hashable, Sendable {
    package enum Holder: Hashable, Sendable {
        case directory(DirectoryIdentity)
        case unreachableDirectory(StorageDirectory)
        case store(String)
    }

    /// The key in the store (a directory's: the file's name), and what holds it; key first saves a word per entry.
    package let key: String
    package let holder: Holder

    package static func file(_ name: String, in identity: DirectoryIdentity) -> CellKey {
        CellKey(key: name, holder: .directory(identity))
    }

    static func store(_ identity: String, key: String) -> CellKey { CellKey(key: key, holder: .store(identity)) }

    var store: String? { if case .store(let identity) = holder { identity } else { nil } }
}

/// What the registry needs of a cell, whatever its value type.
protocol RegisteredCell: AnyObject, Sendable {
    /// The Swift type of the cell's value, as a program names it (`Int`, `Settings`), for messages.
    var valueTypeName: String { get }
    /// The store and key, when the backer is a store's (other than a directory's).
    var storeKey: CellKey? { get }
    /// The directory of the cell's file and the file's name, when its key is a directory's.
    var directory: StorageDirectory? { get }
    var fileName: String? { get }
    @discardableResult func flush(waitingForJobs: Bool) -> FlushResult
    /// Makes `error` the cell's last error, and reports it.
    func record(_ error: WLStorageError, asMisuse: Bool)
    /// What ``flush(waitingForJobs:)`` would find, seen from `thread`.
    func flushState(from thread: UInt) -> CellFlushState
    func checkForExternalChange()
    /// Hands the backer what its store's feed carried for its key, or (`mustRead`) that it changed uncarried.
    func offer(_ changes: [WLStorageCarriedChange], mustRead: Bool)
    /// A store key's medium (not a directory's), whose store writes the cell's batches; constant, read without a lock.
    var storeMedium: StoreMedium? { get }
    /// The key the registry keeps the cell by, if any: kept in the cell, read and written under the registry's lock.
    var registeredKey: CellKey? { get set }
    func takeBatchWrite(on thread: UInt) -> BatchTake<BatchWrite>
    func finishBatchWrite(_ version: UInt64, data: Data, failure: WLStorageError?) -> Bool
    func giveBackBatchWrite(unsure batch: BatchWrite?)
}

/// What a flush of every cell finds in a cell, from the flushing thread: as a batch does (``BatchTake``), or work.
enum CellFlushState {
    case idle
    case work
    case busyHere
}

/// Every live cell (for a flush of all, the monitor, one cell per file), held weakly but those released with work left
/// (``keep(_:)``). The lock guards the tables only; no cell is released under it (its deinit unregisters).
final class StorageRegistry: Sendable {
    private struct Entry: Sendable {
        weak var cell: (any RegisteredCell)?
        let id: ObjectIdentifier
    }

    /// A key's opening: its thread, and the group the threads waiting for it wait on, made by the first to wait.
    private struct Opening {
        let key: CellKey
        let owner: UInt
        var waiters: DispatchGroup?
    }

    private struct Tables {
        /// The cells of keys in stores, by their keys.
        var entries: [CellKey: Entry] = [:]
        /// Cells registered by themselves (no key, or moved aside from a path); a keyed cell keeps its key itself.
        var cells: [ObjectIdentifier: (entry: Entry, movedAsideFrom: StorageDirectory?)] = [:]
        /// Cells kept alive until their work is done, with the number of ``keep(_:)`` calls not balanced yet.
        var kept: [ObjectIdentifier: (cell: any RegisteredCell, count: Int)] = [:]
        /// The keys being opened, by the threads that read them and make their defaults (see ``open(_:as:matches:)``).
        var opening: [Opening] = []
        /// Directory paths of cells moved out of their keys' way, with counts: records may be stale until re-examined.
        var movedAside: [StorageDirectory: Int] = [:]
        /// Whether a cell was ever keyed by its directory's path (which led nowhere): until then, none is looked for.
        var keyedByPath = false

        /// Counts one cell less moved aside from its path, when the registration of `id` was one.
        mutating func endMovedAside(_ id: ObjectIdentifier) {
            guard let path = cells[id]?.movedAsideFrom else { return }
            if let count = movedAside[path], count > 1 { movedAside[path] = count - 1 } else { movedAside[path] = nil }
        }
    }

    enum Lookup<T: Codable & Sendable> {
        case none
        case found(StorageCell<T>)
        /// A live cell of another value type stands for the same file.
        case mismatch(String)
    }

    /// What a look-up of a key to open finds: its live cell, another thread opening it, or the right to open it.
    private enum OpeningStep {
        case found(any RegisteredCell)
        case wait(DispatchGroup)
        case open(CellKey?)
    }

    private let tables = Lock(Tables())

    private static func key(directory: StorageDirectory, name: String, identity: DirectoryIdentity?) -> CellKey {
        identity.map { .file(name, in: $0) } ?? CellKey(key: name, holder: .unreachableDirectory(directory))
    }

    /// The live cell of the file `name` in `directory`, or the right to open it; corrects a stale `identity`.
    func open<T>(
        file name: String, in directory: StorageDirectory, identity: inout DirectoryIdentity?, as type: T.Type
    ) -> (found: Lookup<T>, opening: CellKey?) {
        // A cell keyed by the path alone (it led nowhere) is keyed by what it leads to once it leads somewhere.
        let unreachable = Self.key(directory: directory, name: name, identity: nil)
        if identity != nil,
            tables.withLock({ $0.movedAside[directory] != nil || ($0.keyedByPath && $0.entries[unreachable] != nil) })
        {
            let current = try? directory.identity()
            if current != identity {
                pathFound(directory, leadingTo: current)
                identity = current
            } else if let current {
                directoryChanged(path: directory, to: current)
            }
        }
        while true {
            let key = Self.key(directory: directory, name: name, identity: identity)
            var corrected: DirectoryIdentity??
            let opened = open(key, as: type) { cell in
                switch match(cell, directory: directory, identity: identity) {
                case .matches: return true
                case .movedAside: return false
                case .staleIdentity(let current):
                    corrected = .some(current)
                    return nil
                }
            }
            if let opened { return opened }
            if let corrected { identity = corrected }
        }
    }

    /// The live cell of `key` in a store, or the right to open it.
    func open<T>(_ key: CellKey, as type: T.Type) -> (found: Lookup<T>, opening: CellKey?) {
        open(key, as: type) { _ in true }!
    }

    /// The live cell of `key` that `matches` (`false`: moved aside, looked for again), or the key's opening, held until
    /// ``opened(_:)`` so the key is read and its default made once; an opening thread waits for none.
    private func open<T>(
        _ key: CellKey, as type: T.Type, matches: (any RegisteredCell) -> Bool?
    ) -> (found: Lookup<T>, opening: CellKey?)? {
        let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
        while true {
            let step = tables.withLock { tables -> OpeningStep in
                if let cell = tables.entries[key]?.cell { return .found(cell) }
                guard let other = tables.opening.firstIndex(where: { $0.key == key }) else {
                    tables.opening.append(Opening(key: key, owner: thread))
                    return .open(key)
                }
                if tables.opening.contains(where: { $0.owner == thread }) { return .open(nil) }
                let waiters = tables.opening[other].waiters ?? DispatchGroup()
                if tables.opening[other].waiters == nil { waiters.enter() }  // left by ``opened(_:)``
                tables.opening[other].waiters = waiters
                return .wait(waiters)
            }
            switch step {
            case .found(let cell):
                guard let matching = matches(cell) else { return nil }
                guard matching else { continue }
                return (Self.match(cell, as: type), nil)
            case .wait(let waiters):
                waiters.wait()  // outside every lock
            case .open(let opening):
                return (.none, opening)
            }
        }
    }

    /// Ends the opening of `key` (see ``open(_:as:matches:)``): its cell is registered, or another's was.
    func opened(_ key: CellKey) {
        tables.withLock { t in t.opening.firstIndex { $0.key == key }.flatMap { t.opening.remove(at: $0).waiters } }?
            .leave()
    }

    /// Whether a cell found under the key of `directory`'s file is that file's cell; else it was moved out of the key's
    /// way (its directory was removed since), or the key was stale: `directory` is now this.
    private enum Match {
        case matches
        case movedAside
        case staleIdentity(DirectoryIdentity?)
    }

    /// Whether `cell`, found under `directory`'s key but of another path, is still that file's cell (a removed
    /// directory's inode may be reused). A cell whose path no longer leads to `identity` is moved aside for a cell of
    /// `directory` it kept; when `directory` no longer leads to `identity`, the look-up is keyed by what it is now.
    private func match(_ cell: any RegisteredCell, directory: StorageDirectory, identity: DirectoryIdentity?) -> Match {
        guard let identity, let other = cell.directory, other != directory else { return .matches }
        let isThatFile = (try? other.identity()) == identity
        if !isThatFile {
            let id = ObjectIdentifier(cell)
            tables.withLock { tables in
                if let key = cell.registeredKey, let entry = tables.entries[key], entry.id == id {
                    tables.entries[key] = nil
                    cell.registeredKey = nil
                    tables.cells[id] = (entry, other)
                    tables.movedAside[other, default: 0] += 1
                }
            }
        }
        // Every cell of `directory`, wherever it is keyed, is keyed by what it leads to now: a stale cell moves once.
        let current = try? directory.identity()
        guard current == identity else {
            pathFound(directory, leadingTo: current)
            return .staleIdentity(current)
        }
        if isThatFile { return .matches }
        directoryChanged(path: directory, to: identity)
        return .movedAside
    }

    /// `directory` leads to `current` (`nil`: nowhere), not its recorded identity: its cells and records are rekeyed.
    private func pathFound(_ directory: StorageDirectory, leadingTo current: DirectoryIdentity?) {
        Runtime.shared.monitor.correct(directory, to: current)
        DirectoryTable.forget(directory)
        directoryChanged(path: directory, to: current)
    }

    /// `directory`, removed, was made again by this process as `identity`: its cells and the monitor's record are
    /// keyed by that, as the monitor's next look at the path would key them.
    func directoryMade(_ directory: StorageDirectory, identity: DirectoryIdentity) {
        Runtime.shared.monitor.correct(directory, to: identity)
        directoryChanged(path: directory, to: identity)
    }

    /// The live cells of the store `identity`: of `key`, or of every key.
    func cells(ofStore identity: String, key: String?) -> [any RegisteredCell] {
        if let key {
            return tables.withLock { $0.entries[.store(identity, key: key)]?.cell }.map { [$0] } ?? []
        }
        return liveCells().filter { $0.storeKey?.store == identity }
    }

    func cell(for key: CellKey) -> (any RegisteredCell)? { tables.withLock { $0.entries[key]?.cell } }

    /// Registers `cell` by file or identity, or returns the file's cell registered meanwhile; fixes a stale `identity`.
    func register<T>(_ cell: StorageCell<T>, identity: inout DirectoryIdentity?) -> Lookup<T> {
        let id = ObjectIdentifier(cell)
        var key: CellKey
        if let directory = cell.directory, let name = cell.fileName {
            key = Self.key(directory: directory, name: name, identity: identity)
        } else if let storeKey = cell.storeKey {
            key = storeKey
        } else {
            tables.withLock { $0.cells[id] = (Entry(cell: cell, id: id), nil) }
            return .none
        }
        while true {
            let existing = tables.withLock { tables -> (any RegisteredCell)? in
                // One look-up where the key is free; a live entry replaced is put back.
                if let replaced = tables.entries.updateValue(Entry(cell: cell, id: id), forKey: key) {
                    if let existing = replaced.cell {
                        tables.entries[key] = replaced
                        return existing
                    }
                }
                cell.registeredKey = key
                if case .unreachableDirectory = key.holder { tables.keyedByPath = true }
                return nil
            }
            guard let existing else { return .none }
            if let directory = cell.directory, let name = cell.fileName {
                switch match(existing, directory: directory, identity: identity) {
                case .matches: break
                case .movedAside: continue
                case .staleIdentity(let current):
                    identity = current
                    key = Self.key(directory: directory, name: name, identity: current)
                    continue
                }
            }
            return Self.match(existing, as: T.self)
        }
    }

    /// Forgets `cell`, called by its deinit (it is neither kept nor released here).
    func unregister(_ cell: any RegisteredCell) {
        let id = ObjectIdentifier(cell)
        tables.withLock { tables in
            tables.endMovedAside(id)
            guard tables.cells.removeValue(forKey: id) == nil, let key = cell.registeredKey else { return }
            if tables.entries[key]?.id == id { tables.entries[key] = nil }
        }
    }

    /// The cells of files at `path` are now `identity`'s (`nil`: by path); a cell whose new key is taken keeps its old.
    func directoryChanged(path: StorageDirectory, to identity: DirectoryIdentity?) {
        _ = tables.withLock { tables -> [any RegisteredCell] in
            // Strong references leave with `moved`, released after the lock, so none is the last one dropped under it.
            var moved: [any RegisteredCell] = []
            if identity == nil { tables.keyedByPath = true }
            /// The key of `cell` under `identity` when it is a file's at `path` and the key is free (not its own).
            func freeKey(for cell: any RegisteredCell) -> CellKey? {
                moved.append(cell)
                guard let directory = cell.directory, directory == path, let name = cell.fileName else { return nil }
                let newKey = Self.key(directory: path, name: name, identity: identity)
                guard let occupant = tables.entries[newKey]?.cell else { return newKey }
                moved.append(occupant)
                return nil
            }
            for (key, entry) in tables.entries {
                guard let cell = entry.cell, let newKey = freeKey(for: cell) else { continue }
                tables.entries[key] = nil
                tables.entries[newKey] = entry
                cell.registeredKey = newKey
            }
            // A cell moved out of its key's way, of a file in that directory, takes its key again where it is free.
            for (id, unkeyed) in tables.cells {
                guard let cell = unkeyed.entry.cell, let newKey = freeKey(for: cell) else { continue }
                tables.entries[newKey] = unkeyed.entry
                tables.endMovedAside(id)
                tables.cells[id] = nil
                cell.registeredKey = newKey
            }
            return moved
        }
    }

    /// Keeps `cell` alive until each call is balanced by ``letGo(_:)``.
    func keep(_ cell: any RegisteredCell) {
        tables.withLock { tables in
            let id = ObjectIdentifier(cell)
            tables.kept[id] = (cell, (tables.kept[id]?.count ?? 0) + 1)
        }
    }

    /// Balances one ``keep(_:)``; with the last, the cell's last reference may go, after the lock.
    func letGo(_ cell: any RegisteredCell) {
        _ = tables.withLock { tables -> (any RegisteredCell)? in  // the cell let go is released after the lock
            let id = ObjectIdentifier(cell)
            guard let entry = tables.kept[id] else { return nil }
            if entry.count > 1 {
                tables.kept[id]?.count = entry.count - 1
                return nil
            }
            return tables.kept.removeValue(forKey: id)?.cell
        }
    }

    func liveCells() -> [any RegisteredCell] {
        tables.withLock { tables in
            // Not `compactMap(\.cell)`, which copies each entry and its weak reference.
            var cells: [any RegisteredCell] = []
            cells.reserveCapacity(tables.entries.count + tables.cells.count)
            for entry in tables.entries.values {
                if let cell = entry.cell { cells.append(cell) }
            }
            for unkeyed in tables.cells.values {
                if let cell = unkeyed.entry.cell { cells.append(cell) }
            }
            return cells
        }
    }

    private static func match<T>(_ cell: any RegisteredCell, as type: T.Type) -> Lookup<T> {
        if let typed = cell as? StorageCell<T> { return .found(typed) }
        return .mismatch(cell.valueTypeName)
    }
}
