import Foundation
import WLStorage
import WLStoragePostgres

/// `--pending URL NAMESPACE STORES KEYS TIMEOUT SHUTDOWN-FLUSH-TIMEOUT`: a program that ends with many values pending.
///
/// Makes `STORES` stores of `URL` (namespaces `NAMESPACE-0`, `NAMESPACE-1`, …; only `NAMESPACE` for one store) with a
/// timeout of `TIMEOUT` seconds, each with `KEYS` storages of an Int (keys `k0`, `k1`, …), sets
/// ``WLStorageSystem/shutdownFlushTimeout`` to `SHUTDOWN-FLUSH-TIMEOUT` seconds, and prints `ready` (with
/// WLSTORAGE_TEST_ENCRYPTION_KEY set, the stores are encrypted with that key). On the line `go`, it
/// sets the storage of key `kN` to N in every store, prints `set`, and calls `exit(0)` at once: what is not written by
/// then is left to the flush at exit. On the line `hold`, it sets them and prints `set` too, then waits for a signal
/// (SIGTERM): the package's flush on that signal writes what is pending, and ends the program by it.
func runPendingMode(_ arguments: [String]) -> Never {
    guard arguments.count == 8, let stores = Int(arguments[4]), let keys = Int(arguments[5]),
        let timeout = Int(arguments[6]), let shutdownTimeout = Int(arguments[7])
    else {
        FileHandle.standardError.write(
            Data(
                "usage: WLStoragePostgresTestChild --pending URL NAMESPACE STORES KEYS TIMEOUT SHUTDOWN-FLUSH-TIMEOUT\n"
                    .utf8))
        exit(64)
    }
    WLStorageSystem.shutdownFlushTimeout = .seconds(shutdownTimeout)
    // With WLSTORAGE_TEST_ENCRYPTION_KEY set (base64), every store's values are encrypted with that key.
    var key: WLStorageEncryptionKey?
    if ProcessInfo.processInfo.environment["WLSTORAGE_TEST_ENCRYPTION_KEY"] != nil {
        do {
            key = try WLStorageEncryptionKey(environmentVariable: "WLSTORAGE_TEST_ENCRYPTION_KEY")
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            exit(65)
        }
    }
    var storages: [WLStorage<Int>] = []
    for index in 0..<stores {
        let namespace = stores == 1 ? arguments[3] : "\(arguments[3])-\(index)"
        let postgres = openStore(url: arguments[2], namespace: namespace, timeout: .seconds(timeout))
        let store: any WLStorageStore = key.map { postgres.encrypted(with: $0) } ?? postgres
        for key in 0..<keys {
            storages.append(WLStorage(key: "k\(key)", defaultValue: -1, flushInterval: 60, store: store))
        }
    }
    say("ready")
    while let line = readLine() {
        guard line == "go" || line == "hold" else { continue }
        for (index, storage) in storages.enumerated() {
            storage.wrappedValue = index % keys
        }
        say("set")
        if line == "go" { exit(0) }
        while true { pause() }
    }
    exit(0)
}
