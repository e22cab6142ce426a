// A small program that the tests start as a real child process, to check what happens to a storage when the
// program is stopped by a signal, exits, or is killed.
//
// Usage: WLStorageTestChild MODE DIRECTORY KEY [VALUE]
// It prints "ready" on a line of its own once the state the test needs is reached.
import Dispatch
import Foundation
import WLStorage

let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    say("usage: WLStorageTestChild MODE DIRECTORY KEY [VALUE]", to: FileHandle.standardError)
    exit(64)
}
if ProcessInfo.processInfo.environment["WLSTORAGE_TEST_BLOCK_SIGNALS"] == "1" {
    // As if started from a thread that blocks these signals: every thread this program makes inherits the mask.
    var blocked = sigset_t()
    sigemptyset(&blocked)
    for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&blocked, signal) }
    pthread_sigmask(SIG_BLOCK, &blocked, nil)
}
if let uid = ProcessInfo.processInfo.environment["WLSTORAGE_TEST_UID"].flatMap(UInt32.init) {
    // Runs as an unprivileged user, so that permission bits apply (root ignores them).
    guard setgroups(0, nil) == 0, setgid(uid) == 0, setuid(uid) == 0 else {
        say("cannot drop privileges", to: FileHandle.standardError)
        exit(70)
    }
}
let mode = arguments[1]
let directory = URL(fileURLWithPath: arguments[2], isDirectory: true)
let key = arguments[3]
let value = arguments.count > 4 ? arguments[4] : "value"

func storage<T: Codable & Sendable>(_ defaultValue: T, flushInterval: Int? = 3_600) -> WLStorage<T> {
    WLStorage(
        defaultValueClosure: { defaultValue }, flushInterval: flushInterval,
        backer: WLStorageDefaultBacker<T>(key: key, directory: directory))
}

func waitForever() -> Never {
    while true { pause() }
}

switch mode {
case "wait":
    // A pending value that only a shutdown flush can write: the interval is an hour and the first write (of the
    // default) has already happened.
    let stored = storage("")
    stored.flush()
    stored.wrappedValue = value
    say("ready")
    waitForever()

case "wait-nil-interval":
    // A pending value of a storage that writes only when flushed (no flush interval): nothing but a shutdown flush
    // writes it. Its default is flushed first, so that the file exists and holds "".
    let stored = storage("", flushInterval: nil)
    stored.flush()
    stored.wrappedValue = value
    say("ready")
    waitForever()

case "early":
    // SIGTERM right after the first storage is created: the package's handler must already be in place.
    let stored = storage("")
    stored.wrappedValue = value
    say("ready")
    kill(getpid(), SIGTERM)
    waitForever()

case "exit":
    let stored = storage("")
    stored.flush()
    stored.wrappedValue = value
    say("ready")
    exit(0)

case "global":
    Globals.directory = directory
    Globals.key = key
    Globals.storage.flush()
    Globals.storage.wrappedValue = value
    say("ready")
// Returns from main: a global storage is never deinitialised, so only the exit flush can write it.

case "ignored":
    // The program ignores SIGTERM before the first storage: the package must leave that alone.
    signal(SIGTERM, SIG_IGN)
    let stored = storage("")
    stored.flush()
    stored.wrappedValue = value
    say("ready")
    waitForever()

case "opt-out":
    // A program that owns its shutdown: it opts out and calls flushAll() itself, then exits with status 0.
    WLStorageSystem.flushesOnSignals = false
    let stored = storage("")
    stored.flush()
    stored.wrappedValue = value
    // Dispatch handles the signal once the source is registered; wait for that before saying "ready".
    let registered = DispatchSemaphore(value: 0)
    let source = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .main)
    source.setEventHandler {
        WLStorageSystem.flushAll()
        say("flushed by the program")
        exit(0)
    }
    source.setRegistrationHandler { registered.signal() }
    source.resume()
    _ = registered.wait(timeout: .now() + 10)
    say("ready")
    dispatchMain()

case "slow":
    // The flush takes a while, so that a second signal arrives while it runs.
    let backer = SlowBacker(directory: directory, key: key)
    let stored = WLStorage(defaultValueClosure: { "" }, flushInterval: 3_600, backer: backer)
    // The first change is written at once (the throttle's leading edge); the second stays pending for an hour.
    stored.wrappedValue = "first"
    stored.flush()
    stored.wrappedValue = value
    say("ready")
    waitForever()

case "rewrite":
    // Rewrites a large value as fast as the disk allows, for the kill -9 test. The value is one number repeated
    // 100,000 times, so a file that mixes two versions, or ends early, is detected.
    let stored = storage("", flushInterval: 0)
    var round = (Int(stored.wrappedValue.prefix { $0 != "-" }) ?? 0) + 1
    stored.wrappedValue = String(repeating: "\(round)-", count: 100_000)
    stored.flush()
    say("ready")
    while true {
        round += 1
        stored.wrappedValue = String(repeating: "\(round)-", count: 100_000)
        usleep(200)
    }

case "set":
    // Another program that stores a value under the same key, then exits.
    let stored = storage("")
    stored.wrappedValue = value
    stored.flush()
    say("ready")

case "reference":
    // The property wrapper as the reference library's README writes it, with the default directory.
    let profile = Profile()
    let appearance = Appearance()
    say("before: \(profile.firstName ?? "nil") \(appearance.theme)")
    profile.firstName = value
    appearance.theme = "light"
    say("ready")

case "open":
    // Opens the storage and exits: opening removes abandoned temporary files.
    let stored = storage("")
    say("length \(stored.wrappedValue.utf8.count)")

case "open-report":
    // Opens the storage, reports its error and value, and exits.
    let stored = storage("", flushInterval: nil)
    say("error \(stored.lastError?.code.name ?? "none")")
    say("length \(stored.wrappedValue.utf8.count)")

case "subscription-cancel", "subscription-drop", "subscription-cancel-in-handler", "values-task":
    // A subscription (or a stream's task) is the last holder of a model that owns the storage, whose value is
    // pending; ending the subscription releases the model and so the storage, whose deinit writes the value.
    lastHolder(mode)
    say("done")

case "handler-blocked-exit", "handler-blocked-signal", "handler-exits":
    handlerAtShutdown(mode, directory: directory, key: key, value: value)

case "signals-toggle":
    // The program switches the package's signal handling off and on again after the first storage exists. It
    // starts as from a shell, with the signals unblocked: a child of the test runner inherits the runner's thread's
    // mask, which blocks them, and a blocked signal takes another path (signalfd) through Dispatch.
    var unblocked = sigset_t()
    sigemptyset(&unblocked)
    for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&unblocked, signal) }
    pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
    let stored = storage("")
    stored.flush()
    WLStorageSystem.flushesOnSignals = false
    WLStorageSystem.flushesOnSignals = true
    stored.wrappedValue = value
    say("ready")
    waitForever()

case "default-wait":
    // A program that only opened the storage (its default, never set, in memory), and exits once the file VALUE
    // exists.
    let stored = storage("default", flushInterval: nil)
    say("ready")
    while !FileManager.default.fileExists(atPath: value) { usleep(10_000) }
    say("value \(stored.wrappedValue)")

case "default-exit":
    // A program that only opens the storage with its default, and exits.
    let stored = storage("default", flushInterval: 1)
    say("value \(stored.wrappedValue)")

case "read-fail-then-set":
    // The first read fails (the test made the file unreadable); once the file VALUE exists, the program changes
    // the value it has, derived from what it read, and flushes.
    let stored = storage("default", flushInterval: nil)
    say("opened \(stored.lastError?.code.name ?? "none") \(stored.wrappedValue)")
    while !FileManager.default.fileExists(atPath: value) { usleep(10_000) }
    stored.wrappedValue += "+1"
    stored.flush()
    say("done \(stored.wrappedValue)")

case "watch-leak":
    // Opens and releases storages in 200 directories under DIRECTORY and reports the inotify watches left.
    // VALUE "keep" keeps the directories; "remove" removes them, then makes them again.
    watchLeak(removing: value == "remove")

case "monitor-without-descriptors":
    monitorStartedWithoutDescriptors()

case _ where mode.hasPrefix("backer-release-"):
    // The backer holds the last reference to its storage and lets go of it from inside its write.
    backerRelease(mode)

case "shutdown-hung":
    shutdownHung()

case "leaks":
    leakScenarios()

case "values-churn":
    valuesChurn()

case "class-value-deinit":
    classValueDeinit(value)

case "flushall-two-backers":
    flushAllFromTwoBackers(value)

case "encrypted":
    encryptedMode(directory: directory, key: key, value: value)

case "write-path":
    writePath(value, directory: directory)

case _ where mode.hasPrefix("one-shot-exit"):
    oneShotExit(mode, directory: directory, key: key, value: value)

case "fleet":
    fleetProgram(directory: directory, version: key, flushInterval: value)

case "older-sets":
    // A program of the older shape of the key's value, storing sets in a tight loop until the file VALUE exists;
    // says `last STAMP ERROR` with the stamp of its last set and the code of its storage's last error.
    let stored = WLStorage(
        key: key, defaultValue: OlderPanel(stamp: 0, wide: false), flushInterval: nil, store: .directory(directory))
    var stamp = 0
    while !FileManager.default.fileExists(atPath: value) {
        stamp += 1
        stored.wrappedValue = OlderPanel(stamp: stamp, wide: stamp % 2 == 0)
        stored.flush()
        if stamp == 1 { say("ready") }
    }
    say("last \(stamp) \(stored.lastError.map { "\($0.code)" } ?? "none")")

case "older-watch":
    // A program of the older shape that only reads the key, following other programs' changes: says `stamp STAMP`
    // each time the stamp of its value changes, until the file VALUE exists, then `final STAMP`.
    let stored = WLStorage(
        key: key, defaultValue: OlderPanel(stamp: 0, wide: false), flushInterval: nil, store: .directory(directory))
    var last = -1
    say("ready")
    while !FileManager.default.fileExists(atPath: value) {
        let stamp = stored.wrappedValue.stamp
        if stamp != last { say("stamp \(stamp)") }
        last = stamp
        usleep(2_000)
    }
    say("final \(stored.wrappedValue.stamp) \(stored.lastError.map { "\($0.code)" } ?? "none")")

case "newer-open":
    // A program of the newer shape: opens the key (rewriting a value read in the older shape) and exits; says
    // `opened STAMP ERROR`.
    let stored = WLStorage(
        key: key, defaultValue: NewerPanel(), flushInterval: nil, store: .directory(directory),
        migrations: [.from(OlderPanel.self) { NewerPanel(stamp: $0.stamp, width: $0.wide ? 1_600 : 800) }])
    let stamp = stored.wrappedValue.stamp
    stored.flush()
    say("opened \(stamp) \(stored.lastError.map { "\($0.code)" } ?? "none")")

default:
    say("unknown mode \(mode)", to: FileHandle.standardError)
    exit(64)
}
