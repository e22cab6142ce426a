import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Tells file-backed storages when another program replaced their file.
///
/// One inotify descriptor for the process, read by a Dispatch source on one labelled serial queue, with one watch
/// per storage directory for `IN_MOVED_TO` (an atomic replace arrives as a rename into the directory) and
/// `IN_CLOSE_WRITE` (a program that writes the file in place). An event names a file; the registry finds the live
/// cell of that file, which reads the file and adopts the value unless it is its own write, and explicit
/// subscribers (the command-line tool's `watch`) are called. When inotify is not available (no descriptor, or no
/// watch left), the directory is polled every half second instead. A directory that is removed is polled until it
/// exists again, and then watched again.
package final class FileMonitor: Sendable {
    package static let shared = FileMonitor()

    /// What a subscriber is told.
    package enum Event: Sendable {
        /// The file may have changed: it was replaced, written, removed, or events were lost.
        case changed
        /// The directory was removed or moved away; no more events will come for it.
        case directoryGone
    }

    private struct Subscriber {
        let directory: String
        let fileName: String
        let handler: @Sendable (Event) -> Void
    }

    private struct State {
        var descriptor: Int32 = -1
        var inotifyFailed = false
        var source: (any DispatchSourceRead)?
        /// The paths each watch was added under: two paths of one directory (a symlink, a bind mount) share a watch.
        var watches: [Int32: Set<String>] = [:]
        var watchedPaths: [String: Int32] = [:]
        var polledPaths: Set<String> = []
        /// Paths that are polled whatever happens (tests of the fallback).
        var pollOnly: Set<String> = []
        var pollTimer: (any DispatchSourceTimer)?
        var subscribers: [UInt64: Subscriber] = [:]
        var nextSubscriber: UInt64 = 0
    }

    private let state = Lock(State())
    private let queue = DispatchQueue(label: "WLStorage.monitor")

    /// Calls `handler` on the monitor's queue whenever the file `fileName` in `directory` may have changed, until
    /// ``unsubscribe(_:)``. Watches the directory if it is not watched yet.
    package func subscribe(
        to fileName: String, in directory: StorageDirectory, _ handler: @escaping @Sendable (Event) -> Void
    ) -> UInt64 {
        watch(directory)
        return state.withLock { state in
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[id] = Subscriber(directory: directory.path, fileName: fileName, handler: handler)
            return id
        }
    }

    package func unsubscribe(_ id: UInt64) {
        state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
    }

    /// Starts watching `directory`, once; later calls for the same directory do nothing. With `inotify` off (tests
    /// of the fallback), the directory is polled.
    func watch(_ directory: StorageDirectory, inotify: Bool = true) {
        state.withLock { state in
            let path = directory.path
            guard state.watchedPaths[path] == nil, !state.polledPaths.contains(path) else { return }
            if !inotify { state.pollOnly.insert(path) }
            if !inotify || !addWatch(path, &state) {
                state.polledPaths.insert(path)
                startPolling(&state)
            }
        }
    }

    /// Adds an inotify watch for `path`. Returns `false` when inotify is unavailable or the directory is missing.
    private func addWatch(_ path: String, _ state: inout State) -> Bool {
        if state.descriptor < 0 && !state.inotifyFailed { start(&state) }
        guard state.descriptor >= 0 else { return false }
        let mask =
            UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_FROM) | UInt32(IN_DELETE)
            | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_ONLYDIR)
        let watch = inotify_add_watch(state.descriptor, path, mask)
        guard watch >= 0 else { return false }
        state.watches[watch, default: []].insert(path)
        state.watchedPaths[path] = watch
        return true
    }

    /// Whether `directory` is polled rather than watched with inotify.
    func isPolled(_ directory: StorageDirectory) -> Bool {
        state.withLock { $0.polledPaths.contains(directory.path) }
    }

    private func start(_ state: inout State) {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC) | Int32(IN_NONBLOCK))
        guard descriptor >= 0 else {
            state.inotifyFailed = true
            return
        }
        state.descriptor = descriptor
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler { [weak self] in self?.readEvents(descriptor) }
        source.resume()
        state.source = source
    }

    private func startPolling(_ state: inout State) {
        guard state.pollTimer == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .milliseconds(500), repeating: .milliseconds(500))
        timer.setEventHandler { [weak self] in self?.poll() }
        timer.resume()
        state.pollTimer = timer
    }

    private func poll() {
        // A directory that is back (it was removed, or inotify had no watch left) gets its watch again, and its files
        // are checked once more for what changed while nothing watched them.
        let (rewatched, polled) = state.withLock { state -> (Set<String>, Set<String>) in
            var rewatched: Set<String> = []
            for path in state.polledPaths.subtracting(state.pollOnly) where addWatch(path, &state) {
                state.polledPaths.remove(path)
                rewatched.insert(path)
            }
            return (rewatched, state.polledPaths)
        }
        let checked = rewatched.union(polled)
        guard !checked.isEmpty else { return }
        for cell in StorageRegistry.shared.liveCells() {
            guard let fileKey = cell.fileKey, checked.contains(fileKey.directory) else { continue }
            cell.checkForExternalChange()
        }
        for subscriber in subscribers(where: { checked.contains($0.directory) }) {
            subscriber.handler(.changed)
        }
    }

    /// Reads every queued inotify event and hands each change of a storage file to its cell and subscribers.
    private func readEvents(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var changed: Set<FileKey> = []
        var gone: Set<String> = []
        var overflowed = false
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
                    if event.mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true }
                    let paths = directoryPaths(of: event.wd)
                    if event.mask & (UInt32(IN_IGNORED) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)) != 0 {
                        forget(event.wd)
                        gone.formUnion(paths)
                    } else if !name.isEmpty && FileName.isPlain(name) {
                        for path in paths { changed.insert(FileKey(directory: path, name: name)) }
                    }
                }
            }
        }
        let registry = StorageRegistry.shared
        for subscriber in subscribers(where: { gone.contains($0.directory) }) {
            subscriber.handler(.directoryGone)
        }
        if overflowed {
            // Events were lost: every file-backed cell and every subscriber checks its file.
            for cell in registry.liveCells() where cell.fileKey != nil { cell.checkForExternalChange() }
            for subscriber in subscribers(where: { !gone.contains($0.directory) }) { subscriber.handler(.changed) }
            return
        }
        for fileKey in changed {
            registry.cell(forFileKey: fileKey)?.checkForExternalChange()
        }
        let changedSubscribers = subscribers { changed.contains(FileKey(directory: $0.directory, name: $0.fileName)) }
        for subscriber in changedSubscribers { subscriber.handler(.changed) }
    }

    private func subscribers(where included: (Subscriber) -> Bool) -> [Subscriber] {
        state.withLock { state in state.subscribers.values.filter(included) }
    }

    private func directoryPaths(of watch: Int32) -> Set<String> {
        state.withLock { $0.watches[watch] ?? [] }
    }

    /// Drops a watch whose directory went away, and polls its paths until the directory is back.
    private func forget(_ watch: Int32) {
        state.withLock { state in
            guard let paths = state.watches.removeValue(forKey: watch) else { return }
            _ = inotify_rm_watch(state.descriptor, watch)
            for path in paths where state.watchedPaths[path] == watch {
                state.watchedPaths[path] = nil
                state.polledPaths.insert(path)
            }
            startPolling(&state)
        }
    }
}
