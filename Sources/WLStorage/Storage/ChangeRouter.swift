import Dispatch
import Synchronization
import WLStorageFiles

/// What a cell follows to hear of outside changes: a directory path's inotify watch (or polling), or a store's feed.
enum ChangeSource: Hashable, Sendable {
    case directory(StorageDirectory)
    case store(String)

    var isDirectory: Bool { if case .directory = self { true } else { false } }
}

/// The one way outside changes reach cells: from the file monitor, the store feeds, and custom backers' feeds. It
/// counts, per source, its followers and the changes it reported. A storage follows before it reads and, once
/// its cell is registered, asks ``reported(_:since:)``; producers ``count(_:)`` before they look for cells, so either
/// the look-up finds the cell or the storage sees the count move. The lock guards the counts only.
final class ChangeRouter: Sendable {

    private struct Followed {
        var users = 0
        var reports: UInt64 = 0
    }

    private let sources = Lock([ChangeSource: Followed]())
    /// Counts the reports of every source: unchanged, it tells a storage without the lock that nothing was reported.
    private let allReports = Atomic<UInt64>(0)

    /// What a source had reported when a storage began following it, to pass to ``reported(_:since:)``.
    struct Reports: Sendable {
        fileprivate var source: UInt64 = 0
        fileprivate var all: UInt64 = 0
    }

    /// Where cells check their keys and store feeds run their rounds: concurrent, so a slow backer holds up no other.
    let checks = DispatchQueue(label: "WLStorage.checks", qos: .utility, attributes: .concurrent)

    // MARK: Following

    /// Starts one use of the watch of `directory`, balanced by ``unfollow(_:)``; returns what the path leads to.
    func follow(directory: StorageDirectory) -> (identity: DirectoryIdentity?, reports: Reports) {
        let reports = begin(.directory(directory))
        return (Runtime.shared.monitor.watch(directory), reports)
    }

    /// Starts one use of `store`'s feed, balanced by ``unfollow(_:)``.
    func follow(store: any WLStorageStore, identity: String) -> Reports {
        let reports = begin(.store(identity))
        Runtime.shared.feeds.use(store, identity: identity)
        return reports
    }

    /// Ends one use of `source`: the watch or the feed ends with its last.
    func unfollow(_ source: ChangeSource) {
        switch source {
        case .directory(let directory): Runtime.shared.monitor.unwatch(directory)
        case .store(let identity): Runtime.shared.feeds.release(identity)
        }
        sources.withLock { sources in
            guard let users = sources[source]?.users else { return }
            if users <= 1 { sources[source] = nil } else { sources[source]?.users = users - 1 }
        }
    }

    /// Whether `source` reported a change since `reports`. Called once the cell is registered (see the type's rule).
    func reported(_ source: ChangeSource, since reports: Reports) -> Bool {
        guard allReports.load(ordering: .sequentiallyConsistent) != reports.all else { return false }
        return sources.withLock { $0[source]?.reports != reports.source }
    }

    /// Counted before the producer starts: a change it reports once started moves the count.
    private func begin(_ source: ChangeSource) -> Reports {
        sources.withLock { sources in
            let all = allReports.load(ordering: .sequentiallyConsistent)
            if let index = sources.index(forKey: source) {
                sources.values[index].users += 1
                return Reports(source: sources.values[index].reports, all: all)
            }
            sources[source] = Followed(users: 1)
            return Reports(source: 0, all: all)
        }
    }

    // MARK: Reporting

    /// Counts a change reported by each of `changed`, before its cells are looked for.
    func count(_ changed: some Sequence<ChangeSource>) {
        sources.withLock { sources in
            for source in changed {
                guard let index = sources.index(forKey: source) else { continue }
                sources.values[index].reports &+= 1
                allReports.add(1, ordering: .sequentiallyConsistent)
            }
        }
    }

    // MARK: Delivering

    /// Hands the cells of `store` what was reported of their keys, and has each check its key, on this thread (the
    /// feeds' round): `keys` in report order, `mustRead` ones told to read; with `everything`, every cell reads.
    func deliver(
        store identity: String, keys: [String], mustRead: Set<String>, everything: Bool,
        carried: [String: [WLStorageCarriedChange]]
    ) {
        // With `everything`, one round over every cell of the store (key `nil`), each told to read.
        for key in everything ? [nil] : keys.map(Optional.some) {
            for cell in Runtime.shared.registry.cells(ofStore: identity, key: key) {
                cell.offer(key.flatMap { carried[$0] } ?? [], mustRead: key.map { mustRead.contains($0) } ?? true)
                cell.checkForExternalChange()
            }
        }
    }

    /// Has each of `cells` check its key on the queue of checks; held weakly, so a storage opened next reads afresh.
    func check(_ cells: [any RegisteredCell]) {
        for cell in cells {
            checks.async { [weak cell] in cell?.checkForExternalChange() }
        }
    }
}

/// Where a custom backer's feed sends its changes: the cell once it exists; a change before that is remembered.
final class FeedTarget<T: Codable & Sendable>: Sendable {
    private struct State {
        weak var cell: StorageCell<T>?
        var missed = false
    }
    private let state = Lock(State())

    func changed() {
        let cell = state.withLock { state -> StorageCell<T>? in
            state.missed = true  // read once, when the cell is attached
            return state.cell
        }
        if let cell { Runtime.shared.router.check([cell]) }
    }

    /// Sends later changes to `cell`; returns whether a change came before.
    func attach(_ cell: StorageCell<T>) -> Bool {
        state.withLock { state in
            state.cell = cell
            return state.missed
        }
    }
}

/// The file monitor's reports: a path's change counted before its cells are looked for, which check on the checks
/// queue; a path leading elsewhere moves its cells (a storage being opened moves its own: ``KeyBinding/catchUp(_:)``).
extension ChangeRouter: FileMonitor.Changes {
    func count(_ paths: [StorageDirectory]?) {
        count(paths.map { $0.map(ChangeSource.directory) } ?? sources.withLock { $0.keys.filter(\.isDirectory) })
    }

    func changed(_ files: Set<FileMonitor.ChangedFile>) {
        check(files.compactMap { Runtime.shared.registry.cell(for: .file($0.name, in: $0.directory)) })
    }

    func changed(everyFileIn paths: Set<StorageDirectory>?) {
        check(Runtime.shared.registry.liveCells().filter { $0.directory.map { paths?.contains($0) ?? true } ?? false })
    }

    func moved(_ path: StorageDirectory, to identity: DirectoryIdentity) {
        Runtime.shared.registry.directoryChanged(path: path, to: identity)
        count([path])
    }
}
