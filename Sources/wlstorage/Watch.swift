import Dispatch
import Foundation
import Synchronization
import WLStorage
import WLStorageFiles

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Prints the value of `key` now and at each change of its file, until `count` values are printed or the
/// process is killed. Never returns.
///
/// Changes are detected by the library's own file monitor, the one that live storages use: inotify on the
/// directory (an atomic replace arrives as a rename into it), or polling where inotify is not available.
///
/// A missing storage directory is created, its last component only, as `set` creates it, so that a value can be
/// watched before the first one is stored.
///
/// - Throws: ``ToolFailure`` when the directory cannot be created.
func watch(
    key: String, fileName: String, in directory: StorageDirectory, count: Int?
) throws(ToolFailure) -> Never {
    try createStorageDirectoryIfMissing(directory)

    // SIGINT and SIGTERM end the tool by their default action. A parent may have started it with them blocked,
    // and Dispatch's threads block every signal, so unblock them on this thread, which waits in dispatchMain().
    var stopSignals = sigset_t()
    sigemptyset(&stopSignals)
    sigaddset(&stopSignals, SIGINT)
    sigaddset(&stopSignals, SIGTERM)
    pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)

    // The subscription is in place before the first read, so no change after that read is missed.
    let printer = ValuePrinter(key: key, fileName: fileName, directory: directory, limit: count)
    let queue = DispatchQueue(label: "wlstorage.watch")
    let subscription = Runtime.shared.monitor.subscribe(to: fileName, in: directory) { event in
        queue.async {
            switch event {
            case .changed:
                printer.update()
            case .directoryGone:
                Console.error("wlstorage: the directory was removed or moved: \(directory.path)\n")
                exit(ExitStatus.failure.rawValue)
            }
        }
    }
    queue.sync { printer.update() }
    withExtendedLifetime(subscription) { dispatchMain() }
}

/// Reads the watched file and prints its value when it differs from the last one printed.
private final class ValuePrinter: Sendable {
    private struct State {
        /// The line printed last, without its newline.
        var lastPrinted: String?
        /// The last problem reported on standard error, so that it is not repeated at every event.
        var lastProblem: String?
        var printedCount = 0
    }

    private let key: String
    private let fileName: String
    private let directory: StorageDirectory
    private let limit: Int?
    private let state = Lock(State())

    init(key: String, fileName: String, directory: StorageDirectory, limit: Int?) {
        self.key = key
        self.fileName = fileName
        self.directory = directory
        self.limit = limit
    }

    /// Reads the file and prints its value if it is new; exits with status 0 once `limit` values are printed.
    func update() {
        let line: String
        do {
            switch try StoredFile.read(Array(fileName.utf8), in: directory) {
            case .bytes(let contents) where !contents.isEmpty:
                if let sealed = SealedValue.description(of: contents) {
                    report(
                        "the value of '\(key)' is \(sealed); pass --key-file with that key to watch it:"
                            + " \(directory.filePath(fileName))")
                    return
                }
                if let problem = JSONText.problem(in: contents) {
                    report("the file of '\(key)' does not hold JSON (\(problem)): \(directory.filePath(fileName))")
                    return
                }
                line = String(decoding: JSONText.compact(contents, forTerminal: true), as: UTF8.self)
            case .tooLarge:
                report("the file of '\(key)' is \(StoredFile.tooLargeReason): \(directory.filePath(fileName))")
                return
            case .bytes, nil:
                line = "(missing)"
            }
        } catch {
            report(ToolFailure(error).message)
            return
        }
        let done = state.withLock { state -> Bool? in
            state.lastProblem = nil
            guard state.lastPrinted != line else { return nil }
            state.lastPrinted = line
            state.printedCount += 1
            return limit.map { state.printedCount >= $0 } ?? false
        }
        guard let done else { return }
        Console.out(line + "\n")
        if done { exit(ExitStatus.success.rawValue) }
    }

    private func report(_ problem: String) {
        let isNew = state.withLock { state in
            defer { state.lastProblem = problem }
            return state.lastProblem != problem
        }
        if isNew { Console.error("wlstorage: \(problem)\n") }
    }
}
