import Foundation
import WLStorage
import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// `--no-descriptors URL NAMESPACE KEY`: a program whose file descriptors run out while it uses a store.
///
/// Takes every descriptor numbered below 64 first, so that its store's connections get higher ones, then makes a store
/// of URL (timeout 2 s) and a storage of KEY (an Int, flush interval 1 s) whose `onChange` prints `changed N`, sets it
/// to 1, flushes, and prints `ready`. Every error reported prints `reported MESSAGE`. On the line `starve`, it lowers
/// RLIMIT_NOFILE to 64: every new descriptor fails with EMFILE, also where its connections closed one (theirs are over
/// the limit); it prints `starved`. On `go`, it sets 2 and 3, runs `update { $0 += 100 }` and prints `updated R` and
/// `value V`, gives the descriptors back (`freed`), flushes, and prints `written` or `pending`. `get` prints
/// `value V`; `exit` ends it.
func runNoDescriptorsMode(_ arguments: [String]) -> Never {
    guard arguments.count == 5 else {
        FileHandle.standardError.write(
            Data("usage: WLStoragePostgresTestChild --no-descriptors URL NAMESPACE KEY\n".utf8))
        exit(64)
    }
    var fillers: [Int32] = []
    repeat {
        let filler = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard filler >= 0 else { exit(70) }
        fillers.append(filler)
    } while fillers.last! < 63
    WLStorageSystem.errorHandler = { error in say("reported \(error.message)") }
    let store = openStore(url: arguments[2], namespace: arguments[3])
    let storage = WLStorage<Int>(key: arguments[4], defaultValue: 0, flushInterval: 1, store: store)
    let subscription = storage.onChange(queue: DispatchQueue(label: "onChange")) { say("changed \($0)") }
    storage.wrappedValue = 1
    storage.flush()
    say("ready")
    var original = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &original)
    while let line = readLine() {
        switch line {
        case "starve":
            var lowered = original
            lowered.rlim_cur = 64
            guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lowered) == 0 else { exit(70) }
            say("starved")
        case "go":
            storage.wrappedValue = 2
            storage.wrappedValue = 3
            say("updated \(storage.update { $0 += 100; return $0 })")
            say("value \(storage.wrappedValue)")
            guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &original) == 0 else { exit(70) }
            for filler in fillers { close(filler) }
            say("freed")
            storage.flush()
            say(storage.hasPendingChanges ? "pending" : "written")
        case "get":
            say("value \(storage.wrappedValue)")
        default:
            subscription.cancel()
            exit(0)
        }
    }
    exit(0)
}
