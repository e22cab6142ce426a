// A tour of WLStorage that runs for real: values that survive restarts, throttled writes, observation, safe file
// names and the files on disk. Run it twice: the launch count goes up.
//
//     swift run WLStorageDemo            # the tour, in a folder under the system's temporary directory
//     swift run WLStorageDemo --wait     # then wait: Ctrl-C or SIGTERM flushes the pending value before exiting
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

    init(key: String, directory: URL) {
        self.key = key
        self.backer = WLStorageDefaultBacker(key: key, directory: directory)
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

let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("wlstorage-demo", isDirectory: true)
let waitForSignal = CommandLine.arguments.contains("--wait")

print("WLStorage demo — files in \(directory.path)\n")

// 1. A value that survives restarts.
let launches = WLStorage(
    defaultValueClosure: { 0 }, backer: WLStorageDefaultBacker<Int>(key: "launches", directory: directory))
launches.wrappedValue += 1
print("1. This demo has run \(launches.wrappedValue) time(s). Run it again and the count goes up.")

// 2. Any Codable type, under any key. This key has a slash, so its file is named by its SHA-256.
let preferences = WLStorage(
    defaultValueClosure: { Preferences() },
    backer: WLStorageDefaultBacker<Preferences>(key: "user/preferences", directory: directory))
preferences.wrappedValue.recentFiles.append("notes-\(launches.wrappedValue).txt")
preferences.flush()
let preferencesFile = WLStorageDefaultBacker<Preferences>(key: "user/preferences", directory: directory).fileURL!
print("2. Key \"user/preferences\" is stored as \(preferencesFile.lastPathComponent)")
print("   \(try String(contentsOf: preferencesFile, encoding: .utf8))")

// 3. Observation: a handler on a queue of our choosing sees every change, from any thread.
let counter = CountingBacker<Int>(key: "counter", directory: directory)
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
    print("   \(String(mode, radix: 8))  \(String(size).padding(toLength: 5, withPad: " ", startingAt: 0))  \(name)")
}

if waitForSignal {
    // 6. Shutdown: a change that the one-hour interval would hold back is flushed by Ctrl-C or SIGTERM.
    let lastSeen = WLStorage(
        defaultValueClosure: { "" }, flushInterval: 3_600,
        backer: WLStorageDefaultBacker<String>(key: "last-seen", directory: directory))
    lastSeen.flush()
    lastSeen.wrappedValue = ISO8601DateFormatter().string(from: Date())
    print("6. Waiting. \"last-seen\" has a change pending for an hour; press Ctrl-C (or send SIGTERM)")
    print("   and it is written before the program ends: cat \(directory.path)/last-seen")
    fflush(nil)  // the output may be a pipe or a file, and the signal ends the program without flushing stdio
    while true { pause() }
}
print("\nDone. `swift run WLStorageDemo --wait` also shows the flush on Ctrl-C.")
