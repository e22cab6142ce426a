import Foundation
import WLStorage
import WLStorageFiles

/// A global storage, which Swift never deinitialises: only the package's exit flush can write it.
enum Globals {
    nonisolated(unsafe) static var directory = URL(fileURLWithPath: "/nonexistent")
    nonisolated(unsafe) static var key = ""
    static let storage = WLStorage(
        defaultValueClosure: { "" }, flushInterval: 3_600,
        backer: WLStorageDefaultBacker<String>(key: key, directory: directory))
}

/// The default backer, slowed down: each write announces itself on standard output and takes half a second.
final class SlowBacker: WLStorageBacker {
    let key: String
    private let backer: WLStorageDefaultBacker<String>

    init(directory: URL, key: String) {
        self.key = key
        self.backer = WLStorageDefaultBacker(key: key, directory: directory)
    }

    func read(defaultValueClosure: () -> String) throws -> String {
        try backer.read(defaultValueClosure: defaultValueClosure)
    }

    func write(value: String) throws {
        say("writing")
        usleep(500_000)
        try backer.write(value: value)
    }
}

/// Writes a line straight to the descriptor, unbuffered, so the test sees it at once.
func say(_ line: String, to handle: FileHandle = .standardOutput) {
    handle.write(Data((line + "\n").utf8))
}

/// The reference library's syntax, in a class: the default directory, which the test sets with WLSTORAGE_DIRECTORY.
final class Profile {
    @WLStorage(key: "first_name", defaultValue: nil)
    var firstName: String?
}

/// The same in a struct.
struct Appearance {
    @WLStorage(key: "theme", defaultValue: "dark")
    var theme: String
}

/// A model object that owns a storage and subscribes to it, capturing itself in the handler.
final class Model: @unchecked Sendable {  // the child uses it from one thread at a time
    let storage: WLStorage<String>
    var subscription: WLStorageSubscription?

    init(_ storage: WLStorage<String>) {
        self.storage = storage
    }

    func subscribe(_ body: @escaping @Sendable (Model) -> Void = { _ in }) -> WLStorageSubscription {
        storage.onChange(queue: DispatchQueue(label: "child.model")) { [self] _ in body(self) }
    }

    deinit {
        say("model released")
    }
}

/// Makes the subscription (or the task iterating `values`) the last holder of a model that owns a storage with a
/// pending value, then ends it the way `mode` says.
func lastHolder(_ mode: String) {
    let directory = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let key = CommandLine.arguments[3]
    let value = CommandLine.arguments.count > 4 ? CommandLine.arguments[4] : "value"
    var model: Model? = Model(
        WLStorage(
            defaultValueClosure: { "" }, flushInterval: 3_600,
            backer: WLStorageDefaultBacker<String>(key: key, directory: directory)))
    model!.storage.flush()
    switch mode {
    case "subscription-cancel":
        // The model keeps its subscription; the program cancels it through another reference. The value is set
        // before subscribing, so that no delivery queued for the handler holds the model too.
        model!.storage.wrappedValue = value
        model!.subscription = model!.subscribe()
        let subscription = model!.subscription!
        model = nil
        subscription.cancel()
    case "subscription-drop":
        // The program holds the only reference to the subscription and drops it.
        model!.storage.wrappedValue = value
        var subscription: WLStorageSubscription? = model!.subscribe()
        model = nil
        subscription = nil
        _ = subscription
    case "subscription-cancel-in-handler":
        // The handler cancels its own subscription, which the model keeps.
        let cancelled = DispatchSemaphore(value: 0)
        model!.subscription = model!.subscribe { model in
            model.subscription?.cancel()
            cancelled.signal()
        }
        model!.storage.wrappedValue = value
        model = nil
        _ = cancelled.wait(timeout: .now() + 30)
    default:  // "values-task"
        // A task iterating `values` holds the model; cancelling the task ends the stream and releases the model.
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let task = Task { [model = model!] in
            for await _ in model.storage.values { started.signal() }
            finished.signal()
        }
        model!.storage.wrappedValue = value
        model = nil
        _ = started.wait(timeout: .now() + 30)
        task.cancel()
        _ = finished.wait(timeout: .now() + 30)
    }
}

/// The number of inotify watches of this process: the `inotify wd:` lines of every inotify descriptor's fdinfo.
func inotifyWatchCount() -> Int {
    var count = 0
    for (descriptor, target) in openDescriptors() where target == "anon_inode:inotify" {
        let info = (try? String(contentsOfFile: "/proc/self/fdinfo/\(descriptor)", encoding: .utf8)) ?? ""
        count += info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
    }
    return count
}

/// The process's open descriptors, each with what it leads to (`/proc/self/fd`).
func openDescriptors() -> [(descriptor: String, target: String)] {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.compactMap { descriptor in
        let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
        return target.map { (descriptor, $0) }
    }
}

/// Waits up to `timeout` seconds for `condition`; returns whether it held.
func waitFor(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Opens and releases a storage in each of 200 directories, and says how many inotify watches are left: `baseline N`,
/// then `after N` once the storages are released (and the directories removed), and with `removing`,
/// `after-recreate N`: the most seen within two seconds after the directories were made again, which no storage uses.
func watchLeak(removing: Bool) {
    let base = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let key = CommandLine.arguments[3]
    let first = WLStorage(
        defaultValueClosure: { "" }, flushInterval: nil,
        backer: WLStorageDefaultBacker<String>(key: key, directory: base))
    first.flush()
    let baseline = inotifyWatchCount()
    say("baseline \(baseline)")
    let directories = (0..<200).map { base.appendingPathComponent("d\($0)", isDirectory: true) }
    for directory in directories {
        do {
            let storage = WLStorage(
                defaultValueClosure: { "" }, flushInterval: nil,
                backer: WLStorageDefaultBacker<String>(key: key, directory: directory))
            _ = storage.wrappedValue
        }
        if removing { try? FileManager.default.removeItem(at: directory) }
    }
    say("peak \(inotifyWatchCount())")
    _ = waitFor(timeout: 5) { inotifyWatchCount() == baseline }
    say("after \(inotifyWatchCount())")
    guard removing else { return }
    for directory in directories {
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
    }
    var most = inotifyWatchCount()
    _ = waitFor(timeout: 2) {
        most = max(most, inotifyWatchCount())
        return false
    }
    say("after-recreate \(most)")
}

/// Starts a monitor of its own on DIRECTORY while every descriptor is taken, so that inotify cannot start, then frees
/// them: says `started N` (the inotify watches then), and `watched` once the monitor watches the directory with inotify
/// again, within 30 s, else `polled`.
func monitorStartedWithoutDescriptors() {
    struct Unheard: FileMonitor.Changes {
        func count(_ paths: [StorageDirectory]?) {}
        func changed(_ files: Set<FileMonitor.ChangedFile>) {}
        func changed(everyFileIn paths: Set<StorageDirectory>?) {}
        func moved(_ path: StorageDirectory, to identity: DirectoryIdentity) {}
    }
    // Dispatch's own descriptors are made first, its timers' among them (made by its manager thread once a timer is
    // armed), as it cannot make them later: the monitor's poll would never fire.
    let warmUp = DispatchSource.makeTimerSource(queue: .global())
    warmUp.schedule(deadline: .now() + .seconds(3_600))
    warmUp.resume()
    _ = waitFor(timeout: 30) { openDescriptors().contains { $0.target == "anon_inode:[timerfd]" } }
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = min(limit.rlim_cur, 256)
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    var taken: [CInt] = []
    while case let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC), descriptor >= 0 { taken.append(descriptor) }
    let monitor = FileMonitor(reportingTo: Unheard())
    let subscription = monitor.subscribe(toEveryFileIn: StorageDirectory(path: CommandLine.arguments[2])) { _ in }
    let started = inotifyWatchCount()
    for descriptor in taken { close(descriptor) }
    say("started \(started)")
    say(waitFor(timeout: 30) { inotifyWatchCount() > 0 } ? "watched" : "polled")
    // Never released, as the package's monitor is not: releasing it with its Dispatch sources live crashes.
    withExtendedLifetime((monitor, subscription, warmUp)) { exit(0) }
}
