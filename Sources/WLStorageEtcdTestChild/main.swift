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
//
// Usage: WLStorageEtcdTestChild --no-descriptors ENDPOINT NAMESPACE KEY
//
// Takes every file descriptor it may open (RLIMIT_NOFILE lowered to the descriptors open), so that a connection's
// socket fails with EMFILE, reads KEY and writes 6 to it, and gives the descriptors back. It prints `read ERROR` and
// `write ERROR` (an error's code and message, or `none`), then sets a storage of KEY (an Int) to 7, flushes, and
// prints `written` or `pending ERROR`.
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

/// The `--no-descriptors` run (see the top of the file).
func runWithoutDescriptors(_ arguments: [String]) -> Never {
    guard arguments.count == 5 else {
        FileHandle.standardError.write(
            Data("usage: WLStorageEtcdTestChild --no-descriptors ENDPOINT NAMESPACE KEY\n".utf8))
        exit(64)
    }
    WLStorageSystem.errorHandler = { error in FileHandle.standardError.write(Data("\(error)\n".utf8)) }
    let stores: [WLStorageEtcdStore]
    do {
        stores = [try WLStorageEtcdStore(endpoints: [arguments[2]], namespace: arguments[3], timeout: .seconds(5))]
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(65)
    }
    // libdispatch's event loop is started first: it cannot start without a descriptor (it ends the process). No storage
    // yet: its feed's connections would come and go, and give descriptors back at any moment.
    let timer = DispatchSource.makeTimerSource()
    timer.schedule(deadline: .now() + 3600)
    timer.resume()
    var original = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &original)
    let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int($0) } ?? []
    var lowered = original
    lowered.rlim_cur = rlim_t((open.max() ?? 2) + 1)
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lowered) == 0 else {
        FileHandle.standardError.write(Data("setrlimit failed: \(errno)\n".utf8))
        exit(70)
    }
    // The listing's own descriptor is closed again: the free numbers under the limit are taken.
    var fillers: [Int32] = []
    while case let filler = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC), filler >= 0 { fillers.append(filler) }
    guard errno == EMFILE else {
        FileHandle.standardError.write(Data("no EMFILE: \(errno)\n".utf8))
        exit(70)
    }
    // As short as can be: libdispatch's own monitor of its threads ends the process when it finds no descriptor.
    let read = Result { try stores[0].read(key: arguments[4]) }
    let written = Result { try stores[0].write(key: arguments[4], data: Data("6".utf8)) }
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &original) == 0 else { exit(70) }
    for filler in fillers { close(filler) }
    func describe<T>(_ result: Result<T, any Error>) -> String {
        switch result {
        case .success: "none"
        case .failure(let error): (error as? WLStorageError).map { "\($0.code) \($0.message)" } ?? "\(error)"
        }
    }
    say("read \(describe(read))")
    say("write \(describe(written))")
    let storage = WLStorage(key: arguments[4], defaultValue: 0, flushInterval: nil, store: stores[0])
    storage.wrappedValue = 7
    storage.flush()
    say(storage.hasPendingChanges ? "pending \(storage.lastError?.message ?? "")" : "written")
    exit(0)
}

if CommandLine.arguments.dropFirst().first == "--no-descriptors" {
    runWithoutDescriptors(CommandLine.arguments)
}
run(CommandLine.arguments)
