import Dispatch
import Foundation
import WLStorage

/// A handler given no queue is running when the program ends: it set a second storage, then blocks (`mode`
/// "handler-blocked-exit" and "handler-blocked-signal", where the program calls `exit` or waits for the test's
/// signal), or it ends the program itself, from inside the set that called it ("handler-exits"). The flush at the end
/// writes both storages, `KEY` and `KEY-also`, whose values are `value`.
func handlerAtShutdown(_ mode: String, directory: URL, key: String, value: String) -> Never {
    func open(_ key: String) -> WLStorage<String> {
        WLStorage(
            defaultValueClosure: { "" }, flushInterval: nil,
            backer: WLStorageDefaultBacker<String>(key: key, directory: directory))
    }
    let observed = open(key)
    let also = open(key + "-also")
    observed.flush()
    also.flush()
    let running = DispatchSemaphore(value: 0)
    let subscription = observed.onChange(queue: nil) { value in
        also.wrappedValue = value
        if mode == "handler-exits" { exit(0) }
        running.signal()
        while true { pause() }
    }
    // Set on a thread of its own, which the handler then holds.
    Thread.detachNewThread { observed.wrappedValue = value }
    guard running.wait(timeout: .now() + 30) == .success else {
        say("the handler did not run", to: FileHandle.standardError)
        exit(70)
    }
    say("ready")
    if mode == "handler-blocked-exit" {
        withExtendedLifetime(subscription) { exit(0) }
    }
    withExtendedLifetime(subscription) { waitForever() }
}
