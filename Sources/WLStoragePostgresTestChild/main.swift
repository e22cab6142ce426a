// A replica that the PostgreSQL tests start as a real child process: one storage of an Int in a PostgreSQL store,
// driven by commands on standard input, telling on standard output what its observers see.
//
// Usage: WLStoragePostgresTestChild URL NAMESPACE KEY FLUSH-INTERVAL
// (or `--pending …`, a program that ends with many values pending: see Pending.swift)
// (or `--appends …`, a program that appends ids to a list with atomic updates: see Appends.swift)
// (or `--version-appends …`, such a program of one of three versions of a type: see VersionAppends.swift)
// (or `--no-descriptors …`, a program whose file descriptors run out while it uses a store: see NoDescriptors.swift)
// (with WLSTORAGE_TEST_ENCRYPTION_KEY, the base64 text of a key, in the environment: an encrypted store)
//
// Commands, one a line: `set N` (prints `set N`), `increment N` (N atomic updates, then prints `incremented N`),
// `get` (prints `value N`), `flush` (prints `flushed`), `sockets` (prints `sockets N`, the open sockets), `exit` (prints
// `sockets at exit N` once the package's exit handler has run).
// Observers print `observed N` (withObservationTracking), `values N` ($storage.values) and `changed N` (onChange).
// It prints `ready` once every observer is in place.
import Dispatch
import Foundation
import WLStorage
import WLStoragePostgres

let arguments = CommandLine.arguments
if arguments.count > 1 && arguments[1] == "--pending" { runPendingMode(arguments) }
if arguments.count > 1 && arguments[1] == "--fleet" { runFleetMode(arguments) }
if arguments.count > 1 && arguments[1] == "--appends" { runAppendsMode(arguments) }
if arguments.count > 1 && arguments[1] == "--version-appends" { runVersionAppendsMode(arguments) }
if arguments.count > 1 && arguments[1] == "--no-descriptors" { runNoDescriptorsMode(arguments) }
guard arguments.count == 5, let interval = Int(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: WLStoragePostgresTestChild URL NAMESPACE KEY FLUSH-INTERVAL\n".utf8))
    exit(64)
}
// Registered before any storage, so it runs after the package's handler at exit: what sockets are still open then.
atexit { say("sockets at exit \(openSockets())") }
let store = openStore(url: arguments[1], namespace: arguments[2])
// With WLSTORAGE_TEST_ENCRYPTION_KEY set (base64), the values are encrypted with that key.
let storage: WLStorage<Int>
if ProcessInfo.processInfo.environment["WLSTORAGE_TEST_ENCRYPTION_KEY"] != nil {
    do {
        let key = try WLStorageEncryptionKey(environmentVariable: "WLSTORAGE_TEST_ENCRYPTION_KEY")
        storage = WLStorage(
            key: arguments[3], defaultValue: 0, flushInterval: interval, store: store.encrypted(with: key))
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(65)
    }
} else {
    storage = WLStorage(key: arguments[3], defaultValue: 0, flushInterval: interval, store: store)
}

let printer = ObservationPrinter(storage)

let firstValue = DispatchSemaphore(value: 0)
let consumer = Task.detached {
    var first = true
    for await value in storage.values {
        say("values \(value)")
        if first {
            first = false
            firstValue.signal()
        }
    }
}
firstValue.wait()
let subscription = storage.onChange(queue: DispatchQueue(label: "onChange")) { value in
    say("changed \(value)")
    printer.recheck()
}
say("ready")

while let line = readLine() {
    let words = line.split(separator: " ")
    switch words.first {
    case "set":
        guard words.count == 2, let value = Int(words[1]) else { continue }
        storage.wrappedValue = value
        say("set \(value)")
    case "increment":
        guard words.count == 2, let count = Int(words[1]) else { continue }
        for _ in 0..<count { storage.update { $0 += 1 } }
        say("incremented \(count)")
    case "get":
        say("value \(storage.wrappedValue)")
    case "flush":
        storage.flush()
        say("flushed")
    case "sockets":
        say("sockets \(openSockets())")
    case "exit":
        exit(0)
    default:
        say("unknown command: \(line)")
    }
}
subscription.cancel()
consumer.cancel()
exit(0)

/// The number of the process's descriptors that are sockets: its connections to the server.
func openSockets() -> Int {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.filter { descriptor in
        let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
        return target?.hasPrefix("socket:") == true
    }.count
}
