// A program that the etcd tests start as a real child process: it increments one counter in an etcd store with atomic
// updates until told to stop.
//
// Usage: WLStorageEtcdTestChild ENDPOINTS NAMESPACE KEY
// (ENDPOINTS separated by commas; a store timeout of 5 s)
//
// It prints `ready`, and on the line `go` runs `update { $0 += 1 }` on the storage of KEY, one after another, printing
// `acknowledged N` for an update that returned with no error reported by it, N the value it stored, and `reported N`
// for one that reported an error while it ran (on the thread that ran it), N what its closure returned last. On the
// line `stop`, or when its standard input ends (the test is gone), it ends the update it is in, prints `stopped`, and
// exits. It also prints `resent` when an update's write is sent again after its answer was lost, and `traced found` or
// `traced not found` when the update asks the key about it (see WriteOutcomePrinter.swift).
import Foundation
import Synchronization
import WLStorage
import WLStorageEtcd

#if canImport(Glibc)
    import Glibc
#endif

/// Prints `line` on standard output, one line at a time.
func say(_ line: String) {
    Output.lock.lock()
    defer { Output.lock.unlock() }
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

enum Output {
    static let lock = NSLock()
}

func run(_ arguments: [String]) -> Never {
    guard arguments.count == 4 else {
        FileHandle.standardError.write(Data("usage: WLStorageEtcdTestChild ENDPOINTS NAMESPACE KEY\n".utf8))
        exit(64)
    }
    let storage: WLStorage<Int>
    do {
        let endpoints = arguments[1].split(separator: ",").map(String.init)
        let store = try WLStorageEtcdStore(endpoints: endpoints, namespace: arguments[2], timeout: .seconds(5))
        storage = WLStorage(
            key: arguments[3], defaultValue: 0, flushInterval: 1, store: WriteOutcomePrinter(store))
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(65)
    }
    // The errors reported on the thread that runs the updates: those of an update, not of the background's writes or of
    // the change feed.
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
    while !stopped.load(ordering: .relaxed) {
        let before = reported.load(ordering: .relaxed)
        let value = storage.update { count in
            count += 1
            return count
        }
        say(reported.load(ordering: .relaxed) == before ? "acknowledged \(value)" : "reported \(value)")
    }
    say("stopped")
    exit(0)
}

run(CommandLine.arguments)
