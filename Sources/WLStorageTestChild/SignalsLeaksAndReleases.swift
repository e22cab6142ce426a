// Modes of the test child that need a process of their own: a storage released from inside its backer, a shutdown
// with a hung backer, counts of process-wide resources (watches, memory), values released as another program changes
// the file.
import Dispatch
import Foundation
import Synchronization
import WLStorage
import WLStorageFiles

/// A backer over the default backer that holds the last reference to its own storage and lets go of it from inside
/// `write`, after setting the value (and, with `flushing`, flushing) from there.
final class SelfReleasingBacker: WLStorageBacker, Sendable {
    let key: String
    private let inner: WLStorageDefaultBacker<String>
    private let held = Mutex<WLStorage<String>?>(nil)
    private let flushing: Bool

    init(directory: URL, key: String, flushing: Bool) {
        self.key = key
        self.inner = WLStorageDefaultBacker(key: key, directory: directory)
        self.flushing = flushing
    }

    func hold(_ storage: WLStorage<String>) {
        held.withLock { $0 = storage }
    }

    func read(defaultValueClosure: () -> String) throws -> String {
        try inner.read(defaultValueClosure: defaultValueClosure)
    }

    func write(value: String) throws {
        try inner.write(value: value)
        guard
            let storage = held.withLock({ held in
                defer { held = nil }; return held
            })
        else { return }
        storage.wrappedValue = value + "+set-in-write"
        if flushing { storage.flush() }
        // `storage` is the last reference: the storage is released here, inside its own backer's write.
    }
}

/// A backer whose writes block until the process ends: a hung network store.
final class HungBacker: WLStorageBacker, Sendable {
    let key: String
    let started = DispatchSemaphore(value: 0)
    init(key: String) { self.key = key }
    func read(defaultValueClosure: () -> String) throws -> String { defaultValueClosure() }
    func write(value: String) throws {
        started.signal()
        while true { pause() }
    }
}

/// The file of `key` in `directory` as a string, or `nil`.
func storedString(_ key: String, in directory: URL) -> String? {
    guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(key).path) else {
        return nil
    }
    return try? JSONDecoder().decode(String.self, from: data)
}

/// `backer-release-INTERVAL[-flush]`: the backer releases its storage from inside its write. Says `written` when the
/// value set inside the write reaches the file within 10 s (before the exit flush could write it), else `not-written`.
func backerRelease(_ mode: String) {
    let parts = mode.split(separator: "-")
    let interval = Int(parts[2])  // `nil` for none
    let flushing = parts.count > 3
    let directory = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let key = CommandLine.arguments[3]
    let backer = SelfReleasingBacker(directory: directory, key: key, flushing: flushing)
    do {
        let storage = WLStorage(defaultValueClosure: { "" }, flushInterval: interval, backer: backer)
        backer.hold(storage)
        storage.wrappedValue = "v"
        if interval == nil { storage.flush() }
    }
    let written = waitFor(timeout: 10) { storedString(key, in: directory) == "v+set-in-write" }
    say(written ? "written" : "not-written \(storedString(key, in: directory) ?? "nil")")
}

/// `shutdown-hung`: one storage's backer hangs in its write; thirty file storages have a value pending. Says
/// `ready`, then waits for SIGTERM, whose flush must still write the thirty.
func shutdownHung() -> Never {
    let directory = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let hungBacker = HungBacker(key: "hung")
    let hung = WLStorage(defaultValueClosure: { "" }, flushInterval: 3_600, backer: hungBacker)
    var healthy: [WLStorage<String>] = []
    for index in 0..<30 {
        let storage = WLStorage(
            defaultValueClosure: { "" }, flushInterval: 3_600,
            backer: WLStorageDefaultBacker<String>(key: "k\(index)", directory: directory))
        storage.flush()
        storage.wrappedValue = "pending \(index)"
        healthy.append(storage)
    }
    hung.wrappedValue = "never written"  // its first change is written at once, and hangs
    _ = hungBacker.started.wait(timeout: .now() + 10)
    say("ready")
    keptAlive = [hung] + healthy
    while true { pause() }
}

/// Storages that must live until the process ends.
nonisolated(unsafe) var keptAlive: [AnyObject] = []

/// `leaks`: opens and releases storages in ways that each take process-wide resources (inotify watches, directory
/// records), and says for each scenario `NAME watches BEFORE AFTER tables BEFORE AFTER`.
func leakScenarios() {
    let base = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let key = CommandLine.arguments[3]
    let fileManager = FileManager.default
    func make(_ url: URL) { try? fileManager.createDirectory(at: url, withIntermediateDirectories: true) }
    func open<T: Codable & Sendable>(_ directory: URL, _ value: T, interval: Int? = nil) -> WLStorage<T> {
        WLStorage(
            defaultValueClosure: { value }, flushInterval: interval,
            backer: WLStorageDefaultBacker<T>(key: key, directory: directory))
    }
    // Something of the package is always in use, as in a real program.
    let anchor = open(base.appendingPathComponent("anchor"), "")
    anchor.flush()

    func scenario(_ name: String, _ body: () -> Void) {
        let watches = inotifyWatchCount()
        let tables = DirectoryTable.count
        body()
        _ = waitFor(timeout: 5) { inotifyWatchCount() == watches && DirectoryTable.count == tables }
        say("\(name) watches \(watches) \(inotifyWatchCount()) tables \(tables) \(DirectoryTable.count)")
    }

    scenario("symlinks") {
        let links = base.appendingPathComponent("links")
        make(links)
        for index in 0..<50 {
            let target = base.appendingPathComponent("s\(index)")
            make(target)
            try? fileManager.createSymbolicLink(
                at: links.appendingPathComponent("l\(index)"), withDestinationURL: target)
            let storage = open(links.appendingPathComponent("l\(index)"), "")
            storage.flush()
        }
    }
    scenario("retargeted") {
        let links = base.appendingPathComponent("relinks")
        make(links)
        for index in 0..<20 {
            let first = base.appendingPathComponent("ra\(index)")
            let second = base.appendingPathComponent("rb\(index)")
            make(first)
            make(second)
            try? Data("\"second\"".utf8).write(to: second.appendingPathComponent(key))
            let link = links.appendingPathComponent("r\(index)")
            try? fileManager.createSymbolicLink(at: link, withDestinationURL: first)
            let storage = open(link, "")
            storage.flush()
            let temporary = links.appendingPathComponent("r\(index).new")
            try? fileManager.createSymbolicLink(at: temporary, withDestinationURL: second)
            rename(temporary.path, link.path)
            _ = waitFor(timeout: 5) { storage.wrappedValue == "second" }
        }
    }
    scenario("removed") {
        var directories: [URL] = []
        for index in 0..<20 {
            let directory = base.appendingPathComponent("gone\(index)")
            directories.append(directory)
            let storage = open(directory, "")
            storage.flush()
            try? fileManager.removeItem(at: directory)
            usleep(50_000)
        }
        for directory in directories { make(directory) }
        usleep(1_500_000)
    }
    scenario("values-dropped") {
        for index in 0..<20 {
            let storage = open(base.appendingPathComponent("v\(index)"), 0)
            _ = storage.values
            let subscription = storage.onChange(queue: .global()) { _ in }
            _ = subscription
        }
    }
    scenario("type-mismatch") {
        for index in 0..<20 {
            let directory = base.appendingPathComponent("t\(index)")
            let text = open(directory, "")
            let number = open(directory, 0)
            _ = (text.wrappedValue, number.wrappedValue)
        }
    }
    scenario("unreachable") {
        let file = base.appendingPathComponent("plain-file")
        _ = fileManager.createFile(atPath: file.path, contents: Data())
        for index in 0..<20 {
            let storage = open(file.appendingPathComponent("u\(index)"), "")
            _ = storage.wrappedValue
        }
    }
    withExtendedLifetime(anchor) {}
    say("done")
}

/// A value that is a class, whose deinit reads the storage that held it (a log line, say).
final class LoggedBox: Codable, Sendable {
    let text: String
    init(_ text: String) { self.text = text }
    deinit { LoggedBox.onRelease.withLock { $0 }?() }
    static let onRelease = Mutex<(@Sendable () -> Void)?>(nil)
}

/// `class-value-deinit`: the storage's value is a class whose deinit reads the storage. Another program replaces the
/// file (VALUE "change") or removes it ("remove"); the storage adopts that, and the old value goes. Says `adopted`.
func classValueDeinit(_ how: String) {
    let directory = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let key = CommandLine.arguments[3]
    let storage = WLStorage(
        defaultValueClosure: { LoggedBox("default") }, flushInterval: nil,
        backer: WLStorageDefaultBacker<LoggedBox>(key: key, directory: directory))
    storage.wrappedValue = LoggedBox("local")
    storage.flush()
    LoggedBox.onRelease.withLock { $0 = { _ = storage.wrappedValue.text } }
    let file = directory.appendingPathComponent(key)
    if how == "remove" {
        unlink(file.path)
    } else {
        let temporary = directory.appendingPathComponent("outside.tmp")
        try? Data(#"{"text":"outside"}"#.utf8).write(to: temporary)
        rename(temporary.path, file.path)
    }
    let expected = how == "remove" ? "default" : "outside"
    let adopted = waitFor(timeout: 10) { storage.wrappedValue.text == expected }
    LoggedBox.onRelease.withLock { $0 = nil }
    say(adopted ? "adopted" : "not adopted: \(storage.wrappedValue.text)")
}

/// The resident memory of this process, in MiB.
func residentMiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return -1 }
    return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) / 1024
}

/// `values-churn`: one thread sets a counter as fast as it can, ten subscriptions follow it, and four tasks each
/// start iterating `values` 2,000 times, leaving after the first value (some of them cancelled). Says `done N MiB`
/// when every task has ended, then stops the setter. A consumer must not wait for the setter to stop.
func valuesChurn() {
    let directory = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let counter = WLStorage(
        defaultValueClosure: { 0 }, flushInterval: nil,
        backer: WLStorageDefaultBacker<Int>(key: CommandLine.arguments[3], directory: directory))
    // Ten parts of the program follow the counter for good.
    let followers = (0..<10).map { index in
        counter.onChange(queue: DispatchQueue(label: "follower \(index)")) { _ in }
    }
    let stop = Atomic<Bool>(false)
    let setter = Thread {
        var next = 0
        while !stop.load(ordering: .relaxed) {
            next += 1
            counter.wrappedValue = next
        }
    }
    setter.start()
    let finished = DispatchSemaphore(value: 0)
    Task {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for round in 0..<2_000 {
                        let task = Task {
                            for await _ in counter.values { break }
                        }
                        if round % 3 == 0 { task.cancel() }
                        await task.value
                    }
                }
            }
        }
        finished.signal()
    }
    var peak = residentMiB()
    while finished.wait(timeout: .now() + 0.1) == .timedOut {
        peak = max(peak, residentMiB())
        say("waiting \(peak) MiB")
    }
    stop.store(true, ordering: .relaxed)
    say("done \(peak) MiB")
    withExtendedLifetime(followers) {}
}
