import Foundation
import Synchronization
import WLStorage
import WLStoragePostgres

/// `--appends URL NAMESPACE FIRST-ID`: a program that appends ids to one list with atomic updates until told to stop.
///
/// Keeps a storage of `[Int]` under the key `list` in `NAMESPACE` at `URL` (a store timeout of 2 s), prints `ready`,
/// and on the line `go` runs `update { $0.append(id) }` for `FIRST-ID`, `FIRST-ID + 1`, … one after another, printing
/// `appended ID` for an update that returned with no error reported by it, and `reported ID` for one that reported an
/// error while it ran (on the thread that ran it). On the line `stop` it ends the update it is in, prints `stopped`,
/// and exits.
func runAppendsMode(_ arguments: [String]) -> Never {
    guard arguments.count == 5, let firstID = Int(arguments[4]) else {
        FileHandle.standardError.write(
            Data("usage: WLStoragePostgresTestChild --appends URL NAMESPACE FIRST-ID\n".utf8))
        exit(64)
    }
    let store = openStore(url: arguments[2], namespace: arguments[3])
    let storage = WLStorage<[Int]>(key: "list", defaultValue: [], flushInterval: 1, store: store)
    // The errors reported on the thread that runs the updates: those of an update, not of the background's writes or
    // of the change feed.
    let updater = pthread_self()
    let reported = Atomic<Int>(0)
    WLStorageSystem.errorHandler = { error in
        if pthread_equal(pthread_self(), updater) != 0 { reported.add(1, ordering: .relaxed) }
        FileHandle.standardError.write(Data("\(error)\n".utf8))
    }
    let started = DispatchSemaphore(value: 0)
    let stopped = Atomic<Bool>(false)
    Thread.detachNewThread {
        while let line = readLine() {
            if line == "go" { started.signal() }
            if line == "stop" { stopped.store(true, ordering: .relaxed) }
        }
        stopped.store(true, ordering: .relaxed)
        started.signal()
    }
    say("ready")
    started.wait()
    var id = firstID
    while !stopped.load(ordering: .relaxed) {
        let before = reported.load(ordering: .relaxed)
        storage.update { $0.append(id) }
        say(reported.load(ordering: .relaxed) == before ? "appended \(id)" : "reported \(id)")
        id += 1
    }
    say("stopped")
    exit(0)
}
