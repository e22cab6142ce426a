// The `write-path` mode of the test child: one way the package puts a file in place, run to its end or killed at one
// of its system calls, for KilledWriteTests.
import Dispatch
import Foundation
import Synchronization
import WLStorage
import WLStorageFiles

/// A profile that gained a field: a file without `visits` decodes with it taken from the default, and is kept aside
/// as it was (`NAME~before-type-change`) until it is written back in this shape.
struct GrownProfile: Codable, Sendable {
    var name: String
    var visits: Int
}

/// A store that passes every call to a directory store: storages of it are kept by the store backer (keys kept aside
/// and moved aside are keys of the store), not by the file backer.
final class PassThroughStore: WLStorageStore {
    let base: WLStorageDirectoryStore
    let identity: String

    init(directory: URL) {
        self.base = .directory(directory)
        self.identity = "pass-through:" + directory.path
    }

    func read(key: String) throws -> Data? { try base.read(key: key) }
    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }
    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        base.observeChanges(changed)
    }
}

/// With `WLSTORAGE_TEST_KILL_AT_CALL` set to N, the program kills itself with SIGKILL on entry of the Nth system call
/// the package makes in `directory` on the program's own behalf: calls made on the file monitor's queues, which
/// depend on when the kernel delivers events, are not counted, so that each N stands for the same call in every run.
///
/// Before each such call that it does not kill at, `before` runs with the call and the name. The line the program
/// says when it kills itself tells how many renames of `panel` (the key of the rewrite paths) it entered before.
func installKill(in directory: URL, before: (@Sendable (SystemCall, String?) -> Void)? = nil) {
    let target = ProcessInfo.processInfo.environment["WLSTORAGE_TEST_KILL_AT_CALL"].flatMap { Int($0) }
    guard target != nil || before != nil else { return }
    let count = Atomic<Int>(0)
    let renames = Atomic<Int>(0)
    FaultInjection.install(
        { call, name in
            let label = currentQueueLabel()
            guard label != "WLStorage.monitor", label != "WLStorage.checks" else { return nil }
            if count.add(1, ordering: .sequentiallyConsistent).newValue == target {
                say(
                    "killed at \(call)(\(name ?? "directory")) renames \(renames.load(ordering: .sequentiallyConsistent))"
                )
                kill(getpid(), SIGKILL)
            }
            if call == .rename, name == "panel" { renames.add(1, ordering: .sequentiallyConsistent) }
            before?(call, name)
            return nil
        }, forDirectory: directory.standardizedFileURL.path)
}

/// The older shape of the rewrite paths' value, and the newer one the child reads it as.
struct OlderPanel: Codable, Sendable {
    var stamp: Int
    var wide: Bool
}

struct NewerPanel: Codable, Sendable {
    var stamp = 0
    var width = 800
}

/// The label of the queue the calling code runs on, `""` for none. The corresponding C function is
/// `dispatch_queue_get_label` with `DISPATCH_CURRENT_QUEUE_LABEL`, which the `Dispatch` module does not declare.
private func currentQueueLabel() -> String {
    typealias GetLabel = @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    guard let symbol = dlsym(nil, "dispatch_queue_get_label"),
        let label = unsafeBitCast(symbol, to: GetLabel.self)(nil)
    else { return "" }
    return String(cString: label)
}

/// `write-path`: VALUE names the path, and the test has put in the directory what the path starts from:
/// - `replace`: `k` holds `"old"`; a set of `"new"` replaces it;
/// - `create-default`: nothing is stored under `d`; its default `"default"` is saved;
/// - `kept-aside`: `profile` holds a profile without `visits`; its bytes are kept aside and it is written back;
/// - `moved-aside`: `bad` does not decode; it is moved aside and its default saved;
/// - `store-kept-aside`, `store-moved-aside`: the same two through a store of the directory that is not the
///   directory store itself (the store backer's path);
/// - `rewrite`: `panel` holds an older shape of the value; it is read in the newer one and rewritten so, on condition
///   that the file is still the one read;
/// - `raced-rewrite`: the same, with another program's set renamed into place just as the rewrite puts its file in
///   place (the program says `raced`);
/// - `interrupted-exchange`: `panel` holds an older shape of the value; the program makes what a raced rewrite
///   killed between its exchange and the exchange back leaves (the rewrite in place, the other program's set under
///   the exchange's name; it says `raced`), then, counting calls from there, uses the directory, whose clean-up puts
///   the set back.
///
/// Says `done` when the path has run to its end.
func writePath(_ path: String, directory: URL) {
    let panel = directory.appendingPathComponent("panel")
    if path == "interrupted-exchange" { leaveAnInterruptedExchange(of: panel) }
    let raced = Atomic<Bool>(path == "raced-rewrite")
    installKill(in: directory) { call, name in
        // Another program's set, renamed into place just as the rewrite puts its file in place.
        guard call == .rename, name == "panel", raced.exchange(false, ordering: .sequentiallyConsistent) else { return }
        let temporary = directory.appendingPathComponent("outside-set")
        try? Data(#"{"stamp":9,"wide":true}"#.utf8).write(to: temporary)
        guard rename(temporary.path, panel.path) == 0 else { return }
        say("raced")
    }
    let store = PassThroughStore(directory: directory)
    switch path {
    case "rewrite", "raced-rewrite":
        // `panel` holds the older shape: it is read as the newer one, and rewritten so at the flush.
        let stored = WLStorage(
            key: "panel", defaultValue: NewerPanel(), flushInterval: nil, store: .directory(directory),
            migrations: [.from(OlderPanel.self) { NewerPanel(stamp: $0.stamp, width: $0.wide ? 1_600 : 800) }])
        _ = stored.wrappedValue
        stored.flush()
    case "replace", "interrupted-exchange":
        let stored = WLStorage(key: "k", defaultValue: "", flushInterval: nil, store: .directory(directory))
        if path == "replace" { stored.wrappedValue = "new" }
        stored.flush()
    case "create-default":
        let stored = WLStorage(key: "d", defaultValue: "default", flushInterval: nil, store: .directory(directory))
        _ = stored.wrappedValue
        stored.flush()
    case "kept-aside", "store-kept-aside":
        let profile = GrownProfile(name: "", visits: 5)
        let stored =
            path == "kept-aside"
            ? WLStorage(key: "profile", defaultValue: profile, flushInterval: nil, store: .directory(directory))
            : WLStorage(key: "profile", defaultValue: profile, flushInterval: nil, store: store)
        _ = stored.wrappedValue
        stored.flush()
    case "moved-aside", "store-moved-aside":
        let stored =
            path == "moved-aside"
            ? WLStorage(key: "bad", defaultValue: "default", flushInterval: nil, store: .directory(directory))
            : WLStorage(key: "bad", defaultValue: "default", flushInterval: nil, store: store)
        _ = stored.wrappedValue
        stored.flush()
    default:
        say("unknown write path \(path)", to: FileHandle.standardError)
        exit(64)
    }
    say("done")
    exit(0)
}

/// Leaves in `panel`'s directory what a rewrite of `panel` killed between its exchange and the exchange back leaves
/// when another program's set was renamed into place after the rewrite's check: the rewrite at `panel`, and the set
/// under the exchange's name, which names the version read (what `panel` holds now) and the rewrite.
private func leaveAnInterruptedExchange(of panel: URL) {
    let directory = StorageDirectory(path: panel.deletingLastPathComponent().standardizedFileURL.path)
    let written = panel.deletingLastPathComponent().appendingPathComponent("outside-rewrite")
    let set = panel.deletingLastPathComponent().appendingPathComponent("outside-set")
    do {
        try Data(#"{"stamp":0,"wide":false,"width":800}"#.utf8).write(to: written)
        try Data(#"{"stamp":9,"wide":true}"#.utf8).write(to: set)
    } catch {
        say("cannot write the versions: \(error)", to: FileHandle.standardError)
        exit(1)
    }
    guard let expected = directory.status(of: "panel")?.identity,
        let rewrite = directory.status(of: "outside-rewrite")?.identity
    else {
        say("cannot inspect the versions", to: FileHandle.standardError)
        exit(1)
    }
    let exchange = directory.filePath(StorageDirectory.exchangeName(for: "panel", replacing: expected, with: rewrite))
    guard rename(set.path, exchange) == 0, rename(written.path, panel.path) == 0 else {
        say("cannot place the versions", to: FileHandle.standardError)
        exit(1)
    }
    say("raced")
}
