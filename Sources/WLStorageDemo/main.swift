// A tour of WLStorage that runs for real: values that survive restarts, throttled writes, observation, safe file
// names and the files on disk. Run it twice: the launch count goes up.
//
//     swift run WLStorageDemo            # the tour
//     swift run WLStorageDemo --wait     # then a change left pending: Ctrl-C or SIGTERM writes it before exiting
//
// The files are where every storage created with a key alone keeps them, your own default directory
// (WLStorageSystem.defaultDirectory): ~/.local/share/WLStorageDemo/.wlstorage_debug for `swift run`, or
// $WLSTORAGE_DIRECTORY when it is set. When anything fails, the demo says what and exits with status 1.
import Dispatch
import Foundation
import Synchronization
import WLStorage

struct Preferences: Codable, Sendable {
    var theme = "dark"
    var fontSize = 13
    var recentFiles: [String] = []
}

/// The default backer, counting its writes, to show the throttle at work.
final class CountingBacker<T: Codable & Sendable>: WLStorageBacker {
    let key: String
    private let backer: WLStorageDefaultBacker<T>
    private let count = Atomic<Int>(0)

    /// A backer of `key` in the default directory.
    init(key: String) {
        self.key = key
        self.backer = WLStorageDefaultBacker(key: key)
    }

    var writes: Int { count.load(ordering: .relaxed) }

    func read(defaultValueClosure: () -> T) throws -> T {
        try backer.read(defaultValueClosure: defaultValueClosure)
    }

    func write(value: T) throws {
        count.add(1, ordering: .relaxed)
        try backer.write(value: value)
    }
}

/// The first error the package reported. Getters and setters cannot throw, so the package reports its errors to
/// `WLStorageSystem.errorHandler`; the demo keeps the first, and stops with it at its next step.
let firstError = Mutex<WLStorageError?>(nil)

/// Prints `message` on standard error and ends the demo with status 1.
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("WLStorageDemo: \(message)\n".utf8))
    exit(1)
}

/// Ends the demo with status 1 if the package has reported an error.
func stopOnError(in directory: URL) {
    guard let error = firstError.withLock({ $0 }) else { return }
    fail(
        "\(error)\nWLStorageDemo: its files are in \(directory.path); set WLSTORAGE_DIRECTORY to use another directory")
}

/// `path` with the home directory written `~`, as a shell user types it.
func shown(_ path: String) -> String {
    guard let home = ProcessInfo.processInfo.environment["HOME"], home.count > 1, path.hasPrefix(home + "/") else {
        return path
    }
    return "~" + path.dropFirst(home.count)
}

/// The text of the file at `url`.
func contents(of url: URL) throws -> String {
    try String(contentsOf: url, encoding: .utf8)
}

/// The file of `key` in the default directory.
func file<T: Codable & Sendable>(of key: String, _ type: T.Type) throws -> URL {
    guard let url = WLStorageDefaultBacker<T>(key: key).fileURL else {
        throw WLStorageError(code: .directoryUnavailable, message: "no file for the key \(key)", key: key)
    }
    return url
}

func tour(in directory: URL, waitForSignal: Bool) throws {
    print("WLStorage demo — files in \(shown(directory.path))\n")

    // 1. A value that survives restarts, created with a key alone: its file is in the default directory.
    let launches = WLStorage(key: "launches", defaultValue: 0)
    stopOnError(in: directory)
    launches.wrappedValue += 1
    launches.flush()
    stopOnError(in: directory)
    print("1. This demo has run \(launches.wrappedValue) time(s). Run it again and the count goes up.")

    // 2. Any Codable type, under any key. This key has a slash, so its file is named by its SHA-256.
    let preferences = WLStorage(key: "user/preferences", defaultValue: Preferences())
    preferences.wrappedValue.recentFiles.append("notes-\(launches.wrappedValue).txt")
    preferences.flush()
    stopOnError(in: directory)
    let preferencesFile = try file(of: "user/preferences", Preferences.self)
    print("2. Key \"user/preferences\" is stored as \(preferencesFile.lastPathComponent)")
    print("   \(try contents(of: preferencesFile))")

    // 3. Observation: a handler on a queue of our choosing sees every change, from any thread.
    let counter = CountingBacker<Int>(key: "counter")
    let burst = WLStorage(defaultValueClosure: { 0 }, flushInterval: 1, backer: counter)
    let observed = Atomic<Int>(0)
    let delivery = DispatchQueue(label: "demo.observer")
    let subscription = burst.onChange(queue: delivery) { _ in observed.add(1, ordering: .relaxed) }

    // 4. The throttle: 200,000 sets from four threads over a few seconds become a handful of writes.
    let start = Date()
    DispatchQueue.concurrentPerform(iterations: 4) { thread in
        for step in 0..<50_000 {
            burst.wrappedValue = thread * 50_000 + step
            if step % 10_000 == 0 { usleep(300_000) }
        }
    }
    burst.flush()
    delivery.sync {}
    subscription.cancel()
    stopOnError(in: directory)
    let elapsed = Date().timeIntervalSince(start)
    print(
        "3. The observer saw \(observed.load(ordering: .relaxed)) changes, on its own queue.\n"
            + "4. 200,000 sets in \(String(format: "%.1f", elapsed)) s were written \(counter.writes) times"
            + " (the first at once, then at most once a second, then flush()).")

    // 5. The files: JSON, mode 0600, in a directory of mode 0700, and no temporary file left behind.
    print("5. The directory:")
    for name in try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() {
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(name).path)
        let mode = (attributes[.posixPermissions] as? NSNumber)?.uint16Value ?? 0
        let size = (attributes[.size] as? NSNumber)?.intValue ?? 0
        print(
            "   \(String(mode, radix: 8))  \(String(size).padding(toLength: 5, withPad: " ", startingAt: 0))  \(name)")
    }

    guard waitForSignal else {
        print("\nDone. `swift run WLStorageDemo --wait` also shows a pending change written on Ctrl-C.")
        return
    }

    // 6. Shutdown: a change that the one-hour interval holds back is written by Ctrl-C or SIGTERM. A first change is
    // written at once (the throttle's leading edge); flush() makes sure it is on disk, and its write starts the hour.
    // The second change, made within that hour, is pending: in memory, not on disk.
    let lastSeen = WLStorage(key: "last-seen", defaultValue: "", flushInterval: 3_600)
    let now = ISO8601DateFormatter().string(from: Date())
    lastSeen.wrappedValue = "\(now): waiting for a signal"
    lastSeen.flush()
    lastSeen.wrappedValue = "\(now): written on the way out"
    stopOnError(in: directory)
    let lastSeenFile = try file(of: "last-seen", String.self)
    print(
        """
        6. "last-seen" was written, then changed again within its one-hour interval: the change is pending.
           on disk:    \(try contents(of: lastSeenFile))
           in memory:  "\(lastSeen.wrappedValue)"
           Press Ctrl-C (or send SIGTERM): the change is written before the program ends. Then:
           cat \(shown(lastSeenFile.path))
        """)
    fflush(nil)  // the output may be a pipe or a file, and the signal ends the program without flushing stdio
    while true { pause() }
}

WLStorageSystem.errorHandler = { error in
    firstError.withLock { first in
        if first == nil { first = error }
    }
}
guard let directory = WLStorageSystem.defaultDirectory else {
    fail("no storage directory: set WLSTORAGE_DIRECTORY, XDG_DATA_HOME or HOME")
}
do {
    try tour(in: directory, waitForSignal: CommandLine.arguments.contains("--wait"))
} catch {
    fail("\(error)")
}
