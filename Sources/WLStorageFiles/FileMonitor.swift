import Foundation
import WLStorageCore

/// Tells file-backed storages when another program changed their file. One inotify descriptor for the process, read on
/// one serial queue, one watch per directory in use (`IN_MOVED_TO`, `IN_CLOSE_WRITE`, `IN_DELETE`, `IN_MOVED_FROM`). A
/// path is followed, not pinned: a replaced symlink on it (watched via its parent) moves the watch and the cells.
/// Without inotify, or while the directory is missing, the path is polled every half second.
///
/// It reports to ``changes`` and its subscribers, never to cells. The lock guards the tables only: reports are made,
/// and subscribers released, outside it.
package final class FileMonitor: Sendable {
    /// Where the monitor reports changes of the key files in the paths it watches: the change router.
    package protocol Changes: Sendable {
        /// Counts a change in each of `paths` (`nil`: every path followed), before its files are looked at.
        func count(_ paths: [StorageDirectory]?)
        /// The key files `files` may have changed, or every file of `paths` (`nil`: of every path).
        func changed(_ files: Set<ChangedFile>)
        func changed(everyFileIn paths: Set<StorageDirectory>?)
        /// The path leads to another directory than before, `identity`.
        func moved(_ path: StorageDirectory, to identity: DirectoryIdentity)
    }

    /// A key file by name, in the directory it is in.
    package struct ChangedFile: Hashable, Sendable {
        package let name: String
        package let directory: DirectoryIdentity
    }

    private let changes: any Changes

    package init(reportingTo changes: any Changes) { self.changes = changes }

    package enum Event: Sendable {
        /// The file may have changed: it was replaced, written, removed, or events were lost.
        case changed
        /// The directory was removed or moved away; no more events will come for it.
        case directoryGone
    }

    package enum DirectoryEvent: Sendable {
        case file(String)
        /// Any file may have changed: events were lost, or the path now leads to another directory.
        case any
        case directoryGone
    }

    private struct Subscriber {
        let directory: StorageDirectory
        /// The file subscribed to, or `nil` for every file of the directory.
        let fileName: String?
        let handler: @Sendable (DirectoryEvent) -> Void
    }

    private struct WatchedPath {
        var users = 0
        /// The inotify watch of the directory the path leads to, or `nil` while the path is polled.
        var watch: Int32?
        var identity: DirectoryIdentity?
        /// Polled whatever happens (tests of the fallback).
        var pollOnly = false
        /// The watches of the directories holding the symlinks of the path, which report the symlinks' replacement.
        var linkWatches: Set<Int32> = []
    }

    private struct WatchUse {
        /// The directory paths that lead to the watched directory.
        var paths: Set<StorageDirectory> = []
        /// Symlinks in the watched directory that paths go through: (the symlink's name, the path).
        var links: [(name: String, path: StorageDirectory)] = []
        var identity: DirectoryIdentity?
    }

    private struct State {
        var descriptor: Int32 = -1
        var source: (any DispatchSourceRead)?
        /// Paths in use, compared as bytes (see ``StorageDirectory``).
        var paths: [StorageDirectory: WatchedPath] = [:]
        var watches: [Int32: WatchUse] = [:]
        var pollTimer: (any DispatchSourceTimer)?
        var subscribers: [UInt64: Subscriber] = [:]
        var nextSubscriber: UInt64 = 0

        var polledPaths: [StorageDirectory] { paths.compactMap { $0.value.watch == nil ? $0.key : nil } }
    }

    private let state = Lock(State())
    private let queue = DispatchQueue(label: "WLStorage.monitor")

    private static let mask =
        UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_FROM) | UInt32(IN_DELETE)
        | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_ONLYDIR)

    // MARK: Uses

    /// Calls `handler` on the monitor's queue when `fileName` in `directory` may have changed, until unsubscribed.
    package func subscribe(
        to fileName: String, in directory: StorageDirectory, _ handler: @escaping @Sendable (Event) -> Void
    ) -> UInt64 {
        subscribe(fileName, in: directory) { event in
            if case .directoryGone = event { handler(.directoryGone) } else { handler(.changed) }
        }
    }

    /// Calls `handler` on the monitor's queue when a file in `directory` may have changed, until ``unsubscribe(_:)``.
    package func subscribe(
        toEveryFileIn directory: StorageDirectory, _ handler: @escaping @Sendable (DirectoryEvent) -> Void
    ) -> UInt64 {
        subscribe(nil, in: directory, handler)
    }

    private func subscribe(
        _ fileName: String?, in directory: StorageDirectory, _ handler: @escaping @Sendable (DirectoryEvent) -> Void
    ) -> UInt64 {
        watch(directory)
        return state.withLock { state in
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[id] = Subscriber(directory: directory, fileName: fileName, handler: handler)
            return id
        }
    }

    package func unsubscribe(_ id: UInt64) {
        let removed = state.withLock { $0.subscribers.removeValue(forKey: id) }
        if let removed { unwatch(removed.directory) }
    }

    /// Starts one use of the directory at `path`, watching it if new (polled with `inotify` off). Balance with
    /// ``unwatch(_:)``. A change is reported once it returns. Returns what the path leads to (`nil`: unreachable).
    @discardableResult
    package func watch(_ path: StorageDirectory, inotify: Bool = true) -> DirectoryIdentity? {
        // The path is resolved outside the lock (a slow system call), and only for a new path.
        var looked: DirectoryIdentity??
        while true {
            let done = state.withLock { state -> DirectoryIdentity?? in
                if let index = state.paths.index(forKey: path) {
                    state.paths.values[index].users += 1
                    return .some(state.paths.values[index].identity)
                }
                guard let identity = looked else { return nil }
                state.paths[path] = WatchedPath(users: 1, pollOnly: !inotify)
                attach(path, identity: identity, &state)
                return .some(identity)
            }
            if let done { return done }
            looked = .some(try? path.identity())
        }
    }

    /// What the path of `directory` leads to as the monitor last saw it, while it is watched.
    package func identity(of directory: StorageDirectory) -> DirectoryIdentity? {
        state.withLock { $0.paths[directory]?.identity }
    }

    /// Records that `directory`'s path led to `identity` before the monitor looked again; the next storage uses it.
    package func correct(_ directory: StorageDirectory, to identity: DirectoryIdentity?) {
        state.withLock { $0.paths[directory]?.identity = identity }
    }

    /// Ends one use of the directory at `path`. With the last, its watches and its polling end.
    package func unwatch(_ path: StorageDirectory) {
        state.withLock { state in
            guard let users = state.paths[path]?.users else { return }
            guard users <= 1 else {
                state.paths[path]?.users = users - 1
                return
            }
            detach(path, &state)
            state.paths[path] = nil
            stopPollingIfIdle(&state)
        }
    }

    func isPolled(_ directory: StorageDirectory) -> Bool {
        state.withLock { state in state.paths[directory].map { $0.watch == nil } ?? false }
    }

    // MARK: Watches

    /// Watches the directory `path` leads to and its symlinks' directories, or polls the path.
    private func attach(_ path: StorageDirectory, identity: DirectoryIdentity?, _ state: inout State) {
        state.paths[path]?.identity = identity
        let pollOnly = state.paths[path]?.pollOnly ?? false
        if !pollOnly, identity != nil, let watch = addWatch(path.path, &state) {
            state.paths[path]?.watch = watch
            state.watches[watch, default: WatchUse()].paths.insert(path)
            state.watches[watch]?.identity = identity
            for (parent, name) in symlinks(in: path.path) {
                guard let linkWatch = addWatch(parent, &state) else { continue }
                state.watches[linkWatch, default: WatchUse()].links.append((name, path))
                state.paths[path]?.linkWatches.insert(linkWatch)
            }
        } else {
            state.paths[path]?.watch = nil
            startPolling(&state)
        }
    }

    /// Drops the watches `path` holds; a watch no other path uses is removed.
    private func detach(_ path: StorageDirectory, _ state: inout State) {
        guard let watched = state.paths[path] else { return }
        if let watch = watched.watch {
            state.watches[watch]?.paths.remove(path)
            removeIfUnused(watch, &state)
        }
        for linkWatch in watched.linkWatches {
            state.watches[linkWatch]?.links.removeAll { $0.path == path }
            removeIfUnused(linkWatch, &state)
        }
        state.paths[path]?.watch = nil
        state.paths[path]?.linkWatches = []
    }

    private func removeIfUnused(_ watch: Int32, _ state: inout State) {
        guard let use = state.watches[watch], use.paths.isEmpty, use.links.isEmpty else { return }
        state.watches[watch] = nil
        _ = inotify_rm_watch(state.descriptor, watch)
    }

    /// Adds (or finds) the watch of the directory at `path`; `nil` without inotify or directory.
    private func addWatch(_ path: String, _ state: inout State) -> Int32? {
        // Without inotify (no descriptor left, say), each attach tries again: the poll's of a polled path too.
        if state.descriptor < 0 { start(&state) }
        guard state.descriptor >= 0 else { return nil }
        let watch = inotify_add_watch(state.descriptor, path, Self.mask)
        return watch >= 0 ? watch : nil
    }

    /// The symlinks on the way to `path`, through their targets too, each with its directory.
    private func symlinks(in path: String, depth: Int = 0) -> [(parent: String, name: String)] {
        var found: [(String, String)] = []
        var prefix = ""
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        for (index, component) in components.enumerated() {
            let parent = prefix.isEmpty ? "/" : prefix
            prefix += "/" + component
            var status = stat()
            guard lstat(prefix, &status) == 0 else { break }
            guard (status.st_mode & S_IFMT) == S_IFLNK else { continue }
            found.append((parent, String(component)))
            // The rest of the path goes through the symlink's target; bounded, as the system bounds it.
            guard depth < 8, let target = Self.target(ofSymlink: prefix) else { break }
            let base = target.hasPrefix("/") ? target : (parent == "/" ? "" : parent) + "/" + target
            let rest = components[(index + 1)...].joined(separator: "/")
            found += symlinks(in: rest.isEmpty ? base : base + "/" + rest, depth: depth + 1)
            break
        }
        return found
    }

    private static func target(ofSymlink path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func start(_ state: inout State) {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC) | Int32(IN_NONBLOCK))
        guard descriptor >= 0 else { return }
        state.descriptor = descriptor
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler { [weak self] in
            guard let self else { return }
            self.readEvents(descriptor)
            self.pauseReading()
        }
        source.resume()
        state.source = source
    }

    /// How long events gather after a batch is read: a busy directory costs one wakeup per interval, not one per write.
    static let batchingInterval: DispatchTimeInterval = .milliseconds(50)

    /// Stops reading events for ``batchingInterval``. The monitor is never released, so its source always resumes.
    private func pauseReading() {
        guard let source = state.withLock({ $0.source }) else { return }
        source.suspend()
        queue.asyncAfter(deadline: .now() + Self.batchingInterval) { [weak self] in
            self?.state.withLock { $0.source }?.resume()
        }
    }

    // MARK: Polling

    private func startPolling(_ state: inout State) {
        guard state.pollTimer == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .milliseconds(500), repeating: .milliseconds(500))
        timer.setEventHandler { [weak self] in self?.poll() }
        timer.resume()
        state.pollTimer = timer
    }

    private func stopPollingIfIdle(_ state: inout State) {
        guard state.polledPaths.isEmpty else { return }
        state.pollTimer.take()?.cancel()
    }

    private func poll() {
        // A path that can be watched again gets its watch; polled paths' files are checked for what changed meanwhile.
        let polled = state.withLock { $0.polledPaths }
        guard !polled.isEmpty else { return }
        let identities = polled.map { try? $0.identity() }
        let moved = state.withLock { state -> [(StorageDirectory, DirectoryIdentity)] in
            var moved: [(StorageDirectory, DirectoryIdentity)] = []
            for (path, identity) in zip(polled, identities) where state.paths[path]?.watch == nil {
                let before = state.paths[path]?.identity
                attach(path, identity: identity, &state)
                if let identity, identity != before { moved.append((path, identity)) }
            }
            stopPollingIfIdle(&state)
            return moved
        }
        for (path, identity) in moved { directoryMoved(path, to: identity) }
        // Counted before cells are looked for: a storage opened meanwhile checks its file itself.
        changes.count(polled)
        let paths = Set(polled)
        changes.changed(everyFileIn: paths)
        for subscriber in subscribers(where: { paths.contains($0.directory) }) { subscriber.handler(.any) }
    }

    /// The path's directory is another one now: the next write prepares it.
    private func directoryMoved(_ path: StorageDirectory, to identity: DirectoryIdentity) {
        DirectoryTable.forget(path)
        changes.moved(path, to: identity)
    }

    // MARK: Events

    /// Reads every queued inotify event and hands each change of a storage file to its cell and subscribers.
    private func readEvents(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var changed: Set<ChangedFile> = []
        var changedNames: [StorageDirectory: Set<[UInt8]>] = [:]  // names compared as bytes
        var changedPaths: Set<StorageDirectory> = []
        var gone: Set<StorageDirectory> = []
        var relinked: Set<StorageDirectory> = []
        var overflowed = false
        var events: [(watch: Int32, mask: UInt32, cookie: UInt32, name: String)] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { bytes in
                var offset = 0
                let header = MemoryLayout<inotify_event>.size
                while offset + header <= count {
                    let event = bytes.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    let nameBytes = bytes[(offset + header)..<min(count, offset + header + Int(event.len))]
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    offset += header + Int(event.len)
                    events.append((event.wd, event.mask, event.cookie, name))
                }
            }
        }
        let own = OwnRenames.ownEvents(in: events)
        state.withLock { state in
            for (index, event) in events.enumerated() {
                if event.mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true }
                guard let use = state.watches[event.watch] else { continue }
                if event.mask & (UInt32(IN_IGNORED) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)) != 0 {
                    gone.formUnion(use.paths)
                    for path in use.paths { detach(path, &state) }
                    for link in use.links { relinked.insert(link.path) }
                    state.watches[event.watch] = nil
                    if event.mask & UInt32(IN_IGNORED) == 0 { _ = inotify_rm_watch(state.descriptor, event.watch) }
                    continue
                }
                guard !event.name.isEmpty else { continue }
                for link in use.links where link.name == event.name { relinked.insert(link.path) }
                if !use.paths.isEmpty, FileName.isKeyFileName(event.name) {
                    if let identity = use.identity, !own.contains(index) {
                        changed.insert(ChangedFile(name: event.name, directory: identity))
                        changedPaths.formUnion(use.paths)
                    }
                    for path in use.paths { changedNames[path, default: []].insert(Array(event.name.utf8)) }
                }
            }
            for path in gone where state.paths[path] != nil {
                state.paths[path]?.watch = nil
                startPolling(&state)
            }
        }

        for subscriber in subscribers(where: { gone.contains($0.directory) }) {
            subscriber.handler(.directoryGone)
        }
        let told = gone
        for path in relinked.subtracting(gone) { reresolve(path) }
        if overflowed {
            // Events were lost (maybe a removal or a symlink's replacement): every path is watched anew, a path leading
            // nowhere is polled and its subscribers told, and every file-backed cell and subscriber checks its file.
            let paths = state.withLock { Array($0.paths.keys) }
            for path in paths where !gone.contains(path) && !relinked.contains(path) {
                if !rewatch(path) { gone.insert(path) }
            }
            for subscriber in subscribers(where: { gone.contains($0.directory) && !told.contains($0.directory) }) {
                subscriber.handler(.directoryGone)
            }
            changes.count(nil)
            changes.changed(everyFileIn: nil)
            for subscriber in subscribers(where: { !gone.contains($0.directory) }) { subscriber.handler(.any) }
            return
        }
        // Counted before cells are looked for: a storage not registered yet sees the count move.
        changes.count(Array(changedPaths))
        changes.changed(changed)
        for subscriber in subscribers(where: { _ in !changedNames.isEmpty }) {
            let wanted = subscriber.fileName.map { Array($0.utf8) }
            for name in changedNames[subscriber.directory] ?? [] where wanted == nil || wanted == name {
                subscriber.handler(.file(String(decoding: name, as: UTF8.self)))
            }
        }
    }

    /// A symlink on the way to `path` changed: rewatch, and if it leads elsewhere, move the cells and check.
    private func reresolve(_ path: StorageDirectory) {
        guard rewatch(path) else { return }
        // Checked even for the same directory: an event before the new watch would be lost.
        changes.changed(everyFileIn: [path])
        for subscriber in subscribers(where: { $0.directory == path }) { subscriber.handler(.any) }
    }

    /// Watches anew where `path` leads, moving its cells if changed; returns whether it is in use and leads somewhere.
    private func rewatch(_ path: StorageDirectory) -> Bool {
        let identity = try? path.identity()
        let (before, after) = state.withLock { state -> (DirectoryIdentity?, DirectoryIdentity?) in
            guard state.paths[path] != nil else { return (nil, nil) }
            let before = state.paths[path]?.identity
            detach(path, &state)
            attach(path, identity: identity, &state)
            return (before, identity)
        }
        guard let after else { return false }
        if after != before { directoryMoved(path, to: after) }
        return true
    }

    private func subscribers(where included: (Subscriber) -> Bool) -> [Subscriber] {
        state.withLock { state in state.subscribers.values.filter(included) }
    }
}
