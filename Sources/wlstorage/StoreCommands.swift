import Dispatch
import Foundation
import Synchronization
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The commands on a store other than a directory (`--postgres`, `--etcd`): the same keys and the same JSON, through the store
/// protocol. `path` is about files, and is refused; `list` and `verify` are run by the caller, on the store's entries.
///
/// Unless `keyGiven` (the store is an encrypted one, or `rm` was given a key file), a value sealed by an encrypted
/// store is neither replaced nor removed, and `get` and `watch` say with which key it was sealed.
func run(_ command: Command, on store: any WLStorageStore, keyGiven: Bool) throws(ToolFailure) -> ExitStatus {
    switch command {
    case .help(let topic):
        Console.out(Help.text(for: topic))
    case .get(let keys):
        return try printValues(of: keys) { key throws(ToolFailure) in
            guard let data = try read(key, from: store), !data.isEmpty else {
                throw ToolFailure("no value stored for '\(key)' in \(store.identity)")
            }
            if !keyGiven, let sealed = SealedValue.description(of: data) {
                throw ToolFailure(
                    "the value of '\(key)' is \(sealed); pass --key-file with that key to read it: \(store.identity)")
            }
            if let problem = JSONText.problem(in: data) {
                throw ToolFailure("the value of '\(key)' is not JSON (\(problem)) in \(store.identity)")
            }
            return data
        }
    case .set(let key, let json):
        let data = Data(json.utf8)  // checked by run(_:environment:)
        if !keyGiven { try refuseSealed(key, in: store, toDo: "replace it") }
        try calling(store) { try store.write(key: key, data: JSONText.compact(data)) }
    case .remove(let key):
        guard try read(key, from: store) != nil else {
            throw ToolFailure("no value stored for '\(key)' in \(store.identity)")
        }
        if !keyGiven { try refuseSealed(key, in: store, toDo: "remove it") }
        try calling(store) { try store.remove(key: key) }
    case .list(let given):
        let keys = try calling(store) { try store.keys() }.sorted()
        var text = ""
        for key in keys where given.isEmpty || given.contains(key) { text += printableName(key) + "\n" }
        Console.out(text)
    case .watch(let key, let count):
        try watch(key, in: store, count: count, keyGiven: keyGiven)
    case .path, .hash, .verify:
        throw ToolFailure("\(command.name) works on a storage directory, not on \(store.identity)", status: .usage)
    }
    return .success
}

/// Refuses to `toDo` ("replace it", "remove it") the value of `key` without a key file when it is sealed: it would be
/// lost for good, and the key that sealed it was not given.
private func refuseSealed(_ key: String, in store: any WLStorageStore, toDo: String) throws(ToolFailure) {
    guard let data = try read(key, from: store), let sealed = SealedValue.description(of: data) else { return }
    throw ToolFailure(
        "the value of '\(key)' is \(sealed), so it is left as it is; pass --key-file with that key to \(toDo):"
            + " \(store.identity)")
}

private func read(_ key: String, from store: any WLStorageStore) throws(ToolFailure) -> Data? {
    try calling(store) { try store.read(key: key) }
}

/// Calls the store, turning what it throws into a failure of the tool that names the store.
func calling<R>(_ store: any WLStorageStore, _ body: () throws -> R) throws(ToolFailure) -> R {
    do {
        return try body()
    } catch let error as WLStorageError {
        throw ToolFailure(error)
    } catch {
        throw ToolFailure("\(store.identity): \(error)")
    }
}

/// Prints the value of `key` now and at each change the store's feed reports, until `count` values are printed.
private func watch(
    _ key: String, in store: any WLStorageStore, count: Int?, keyGiven: Bool
) throws(ToolFailure) -> Never {
    var stopSignals = sigset_t()
    sigemptyset(&stopSignals)
    sigaddset(&stopSignals, SIGINT)
    sigaddset(&stopSignals, SIGTERM)
    pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)

    let queue = DispatchQueue(label: "wlstorage.watch")
    let printed = Mutex<(last: String?, count: Int)>((nil, 0))
    @Sendable func update() {
        let line: String
        do {
            let data = try store.read(key: key)
            if let data, !data.isEmpty {
                if !keyGiven, let sealed = SealedValue.description(of: data) {
                    Console.error("wlstorage: the value of '\(key)' is \(sealed); pass --key-file with that key\n")
                    return
                }
                if let problem = JSONText.problem(in: data) {
                    Console.error("wlstorage: the value of '\(key)' is not JSON (\(problem))\n")
                    return
                }
                line = String(decoding: JSONText.compact(data, forTerminal: true), as: UTF8.self)
            } else {
                line = "(missing)"
            }
        } catch {
            Console.error("wlstorage: \(store.identity): \(error)\n")
            return
        }
        let done = printed.withLock { printed -> Bool? in
            guard printed.last != line else { return nil }
            printed.last = line
            printed.count += 1
            return count.map { printed.count >= $0 } ?? false
        }
        guard let done else { return }
        Console.out(line + "\n")
        if done { exit(ExitStatus.success.rawValue) }
    }
    // The feed is in place before the first read, so no change after that read is missed.
    let observation = store.observeChanges { change in
        switch change {
        case .key(let changed) where changed != key: break
        default: queue.async { update() }
        }
    }
    guard let observation else {
        throw ToolFailure("\(store.identity) reports no changes; watch needs a store with a change feed")
    }
    queue.sync { update() }
    withExtendedLifetime(observation) { dispatchMain() }
}

extension Command {
    /// The command's name on the command line.
    var name: String {
        switch self {
        case .help: "help"
        case .get: "get"
        case .set: "set"
        case .remove: "rm"
        case .path: "path"
        case .hash: "hash"
        case .list: "list"
        case .verify: "verify"
        case .watch: "watch"
        }
    }
}
