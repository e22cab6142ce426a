// A program that ends with many values pending in an etcd store, which the etcd tests start as a real child process.
//
// Usage: WLStorageEtcdExitChild ENDPOINTS NAMESPACE KEYS [SHUTDOWN-FLUSH-TIMEOUT]
//
// Makes a store of ENDPOINTS (separated by commas) and NAMESPACE, with KEYS storages of an Int (keys `k0`, `k1`, …)
// and a flush interval of 60 s, sets ``WLStorageSystem/shutdownFlushTimeout`` to SHUTDOWN-FLUSH-TIMEOUT seconds when
// it is given (the default, 10 s, otherwise), and prints `ready`. On the line `go`, it sets the storage of key `kN` to
// N, prints `set`, and returns from its main code at once: what is not written by then is left to the flush at exit.
// On the line `hold`, it sets them and prints `set` too, then waits for a signal (SIGTERM): the package's flush on that
// signal writes what is pending, and ends the program by it.
import Foundation
import WLStorage
import WLStorageEtcd

#if canImport(Glibc)
    import Glibc
#endif

/// Prints `line` on standard output at once.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 4 || arguments.count == 5, let keys = Int(arguments[3]), keys > 0,
    arguments.count == 4 || Int(arguments[4]) != nil
else {
    FileHandle.standardError.write(
        Data("usage: WLStorageEtcdExitChild ENDPOINTS NAMESPACE KEYS [SHUTDOWN-FLUSH-TIMEOUT]\n".utf8))
    exit(64)
}
if arguments.count == 5, let seconds = Int(arguments[4]) {
    WLStorageSystem.shutdownFlushTimeout = .seconds(seconds)
}
let store: WLStorageEtcdStore
do {
    store = try WLStorageEtcdStore(
        endpoints: arguments[1].split(separator: ",").map(String.init), namespace: arguments[2])
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(65)
}
let storages = (0..<keys).map { WLStorage(key: "k\($0)", defaultValue: -1, flushInterval: 60, store: store) }
say("ready")

var holding = false
while let line = readLine() {
    guard line == "go" || line == "hold" else { continue }
    for (index, storage) in storages.enumerated() {
        storage.wrappedValue = index
    }
    say("set")
    holding = line == "hold"
    break
}
while holding { pause() }
// The end of the main code: the program exits, and the flush at exit writes what is pending.
