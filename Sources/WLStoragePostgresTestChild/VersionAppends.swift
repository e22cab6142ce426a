import Foundation
import Synchronization
import WLStorage
import WLStoragePostgres

/// Version 1 of the value the `--version-appends` programs share: a list of ids and a theme.
struct AppendsV1: Codable, Sendable {
    var ids: [Int] = []
    var theme = "light"
}

/// Version 2: the theme renamed `colorScheme` (declared, so that both names are written).
struct AppendsV2: Codable, Sendable {
    var ids: [Int] = []
    var colorScheme = "light"
}

/// Version 3: version 2 and a field added, `lineSpacing`.
struct AppendsV3: Codable, Sendable {
    var ids: [Int] = []
    var colorScheme = "light"
    var lineSpacing = 1.0
}

/// The view of the value of a program of version 1 that only sets the theme: it knows no ids.
struct ThemeSetterV1: Codable, Sendable {
    var theme = "light"
}

/// The view of a program of version 3 that only sets the line spacing.
struct SpacingSetterV3: Codable, Sendable {
    var colorScheme = "light"
    var lineSpacing = 1.0
}

/// `--version-appends URL NAMESPACE VERSION FIRST-ID`: a program of version 1, 2 or 3 of a type (see `AppendsV1`) that
/// appends ids to the list of the key `settings` with atomic updates, in rounds, until told to stop; or, for VERSION
/// `1s` or `3s`, a program of version 1 or 3 that knows no ids and sets a field of its own with plain sets (a program
/// that sets the ids' value whole would race its own reads, as any get followed by a set does).
///
/// Prints `ready`; on `go N`, runs `update { $0.ids.append(id) }` for the next N ids from `FIRST-ID` on, printing
/// `appended ID` for an update that returned with no error reported by it, `reported ID` for one that reported an error
/// while it ran (on the thread that ran it), and `not made ID` when that error said the update was not made; a setter
/// sets the theme to `tID` (version 1) or the line spacing to `ID` (version 3) for each id instead, printing nothing.
/// Once it has run every step it was told, it prints `ran COUNT` (the steps run since it started) and waits for the
/// next `go`. Rounds bound what the programs do while one of them waits: updates written on condition are not fair,
/// and a program left to update freely can keep a slower one's writes refused for good. On `stop`, it ends the update
/// it is in, flushes until nothing is pending (for up to 120 s), prints `last VALUE` (the last value it set, or
/// `none`), `flushed` or `pending`, and `stopped`, and exits. A store timeout of 2 s.
func runVersionAppendsMode(_ arguments: [String]) -> Never {
    let versions = ["1", "2", "3", "1s", "3s"]
    guard arguments.count == 6, versions.contains(arguments[4]), let firstID = Int(arguments[5]) else {
        FileHandle.standardError.write(
            Data("usage: WLStoragePostgresTestChild --version-appends URL NAMESPACE VERSION FIRST-ID\n".utf8))
        exit(64)
    }
    let store = openStore(url: arguments[2], namespace: arguments[3])
    func open<V: Codable & Sendable>(_ value: V, renamed: Bool = true) -> WLStorage<V> {
        WLStorage(
            key: "settings", defaultValue: value, flushInterval: 0, store: store,
            migrations: renamed ? [.renamed(from: "theme", to: "colorScheme")] : [])
    }
    switch arguments[4] {
    case "1": runAppends(open(AppendsV1(), renamed: false), firstID: firstID) { $0.ids.append($1) }
    case "2": runAppends(open(AppendsV2()), firstID: firstID) { $0.ids.append($1) }
    case "3": runAppends(open(AppendsV3()), firstID: firstID) { $0.ids.append($1) }
    case "1s": runSets(open(ThemeSetterV1(), renamed: false), firstID: firstID) { $0.theme = "t\($1)" }
    default: runSets(open(SpacingSetterV3()), firstID: firstID) { $0.lineSpacing = Double($1) }
    }
}

/// Calls `step` with each id from `firstID` on, as many times as each `go` says, until `stop`; then flushes, and exits.
private func runSteps<V: Codable & Sendable>(_ storage: WLStorage<V>, firstID: Int, _ step: (Int) -> Void) -> Never {
    let told = Atomic<Int>(0)
    let wake = DispatchSemaphore(value: 0)
    let stopped = Atomic<Bool>(false)
    Thread.detachNewThread {
        while let line = readLine() {
            if line.hasPrefix("go "), let steps = Int(line.dropFirst(3)) { told.add(steps, ordering: .relaxed) }
            if line == "stop" { stopped.store(true, ordering: .relaxed) }
            wake.signal()
        }
        stopped.store(true, ordering: .relaxed)
        wake.signal()
    }
    say("ready")
    var id = firstID
    var last = "none"
    var ran = 0
    while !stopped.load(ordering: .relaxed) {
        guard ran < told.load(ordering: .relaxed) else {
            wake.wait()
            continue
        }
        step(id)
        last = String(id)
        id += 1
        ran += 1
        if ran == told.load(ordering: .relaxed) { say("ran \(ran)") }
    }
    let end = ContinuousClock.now + .seconds(120)
    storage.flush()
    while storage.hasPendingChanges, ContinuousClock.now < end {
        usleep(100_000)
        storage.flush()
    }
    say("last \(last)")
    say(storage.hasPendingChanges ? "pending" : "flushed")
    say("stopped")
    exit(0)
}

private func runSets<V: Codable & Sendable>(
    _ storage: WLStorage<V>, firstID: Int, _ set: @escaping (inout V, Int) -> Void
) -> Never {
    WLStorageSystem.errorHandler = { FileHandle.standardError.write(Data("\($0)\n".utf8)) }
    runSteps(storage, firstID: firstID) { id in
        var value = storage.wrappedValue
        set(&value, id)
        storage.wrappedValue = value
    }
}

private func runAppends<V: Codable & Sendable>(
    _ storage: WLStorage<V>, firstID: Int, _ append: @escaping (inout V, Int) -> Void
) -> Never {
    let updater = pthread_self()
    let reported = Atomic<Int>(0)
    let notMade = Atomic<Int>(0)
    WLStorageSystem.errorHandler = { error in
        if pthread_equal(pthread_self(), updater) != 0 {
            reported.add(1, ordering: .relaxed)
            if error.message.hasPrefix("the update was not made") { notMade.add(1, ordering: .relaxed) }
        }
        FileHandle.standardError.write(Data("\(error)\n".utf8))
    }
    runSteps(storage, firstID: firstID) { id in
        let (before, notMadeBefore) = (reported.load(ordering: .relaxed), notMade.load(ordering: .relaxed))
        storage.update { append(&$0, id) }
        if reported.load(ordering: .relaxed) == before {
            say("appended \(id)")
        } else {
            say(notMade.load(ordering: .relaxed) == notMadeBefore ? "reported \(id)" : "not made \(id)")
        }
    }
}
