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
/// cell of that file, which reads the file and adopts the value unless it is its own write. When inotify is not
/// available (no descriptor, or no watch left), the directory is polled every half second instead.
final class FileMonitor: Sendable {
    static let shared = FileMonitor()

    private struct State {
        var descriptor: Int32 = -1
        var inotifyFailed = false
        var source: (any DispatchSourceRead)?
        var watches: [Int32: String] = [:]
        var watchedPaths: Set<String> = []
        var polledPaths: Set<String> = []
        var pollTimer: (any DispatchSourceTimer)?
    }

    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "WLStorage.monitor")

    /// Starts watching `directory`, once; later calls for the same directory do nothing.
    func watch(_ directory: StorageDirectory) {
        state.withLock { state in
            let path = directory.path
            guard !state.watchedPaths.contains(path), !state.polledPaths.contains(path) else { return }
            if state.descriptor < 0 && !state.inotifyFailed { start(&state) }
            if state.descriptor >= 0 {
                let mask = UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_ONLYDIR)
                let watch = inotify_add_watch(state.descriptor, path, mask)
                if watch >= 0 {
                    state.watches[watch] = path
                    state.watchedPaths.insert(path)
                    return
                }
            }
            state.polledPaths.insert(path)
            startPolling(&state)
        }
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
        let polled = state.withLock { $0.polledPaths }
        for cell in StorageRegistry.shared.liveCells() {
            guard let fileKey = cell.fileKey, polled.contains(parentPath(of: fileKey)) else { continue }
            cell.checkForExternalChange()
        }
    }

    /// Reads every queued inotify event and hands each change of a storage file to its cell.
    private func readEvents(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var changed: [String] = []
        var overflowed = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { bytes in
                var offset = 0
                let header = MemoryLayout<inotify_event>.size
                while offset + header <= count {
                    let watch = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = bytes[(offset + header)..<min(count, offset + header + length)]
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    offset += header + length
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true }
                    if mask & UInt32(IN_IGNORED) != 0 { forget(watch) }
                    guard !name.isEmpty, FileName.isPlain(name), let path = directoryPath(of: watch) else { continue }
                    changed.append(StorageDirectory(path: path).filePath(name))
                }
            }
        }
        if overflowed {
            // Events were lost: every watched cell checks its file.
            for cell in StorageRegistry.shared.liveCells() where cell.fileKey != nil {
                cell.checkForExternalChange()
            }
            return
        }
        for fileKey in Set(changed) {
            StorageRegistry.shared.cell(forFileKey: fileKey)?.checkForExternalChange()
        }
    }

    private func directoryPath(of watch: Int32) -> String? {
        state.withLock { $0.watches[watch] }
    }

    private func forget(_ watch: Int32) {
        state.withLock { state in
            if let path = state.watches.removeValue(forKey: watch) { state.watchedPaths.remove(path) }
        }
    }

    private func parentPath(of filePath: String) -> String {
        guard let slash = filePath.lastIndex(of: "/") else { return "" }
        return filePath[..<slash].isEmpty ? "/" : String(filePath[..<slash])
    }
}
