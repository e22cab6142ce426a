import Dispatch
import Foundation
import Observation
import WLStorage
import WLStoragePostgres

private let output = NSLock()

/// The store of the arguments; on a bad URL, the error on standard error and exit status 65.
func openStore(url: String, namespace: String, timeout: Duration = .seconds(2)) -> WLStoragePostgresStore {
    do {
        return try WLStoragePostgresStore(url: url, namespace: namespace, timeout: timeout)
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(65)
    }
}

/// Prints `line` on standard output, one whole line at a time whatever the thread.
func say(_ line: String) {
    output.lock()
    defer { output.unlock() }
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Prints what `withObservationTracking` sees of the storage: `observed N` after each change it reports.
///
/// Its `onChange` runs when the change is about to be made (willSet), so the value is read, and tracking armed again,
/// on another thread. That read can come before the change is in place: the new tracking then holds the old value and
/// never hears of the change it was armed in the middle of. So after every change (``recheck()``, from the storage's
/// own `onChange`, which runs once the change is made), a tracking that holds an old value and has not fired is armed
/// again. Only a tracking that fired prints on its own: Observation itself must report every change.
final class ObservationPrinter: Sendable {
    private struct Tracking {
        var generation = 0
        var value = 0
        var fired = false
    }

    private let storage: WLStorage<Int>
    private let tracking = Locked(Tracking())

    init(_ storage: WLStorage<Int>) {
        self.storage = storage
        track()
    }

    private func track() {
        let generation = tracking.withLock { state -> Int in
            state.generation += 1
            state.fired = false
            return state.generation
        }
        let value = withObservationTracking {
            storage.wrappedValue
        } onChange: {
            DispatchQueue.global().async { self.fired(generation) }
        }
        tracking.withLock { state in
            if state.generation == generation { state.value = value }
        }
    }

    private func fired(_ generation: Int) {
        let current = tracking.withLock { state -> Bool in
            guard state.generation == generation else { return false }
            state.fired = true
            return true
        }
        guard current else { return }
        track()
        printValue()
    }

    /// Called after each change: arms the tracking again when it holds an old value without having fired.
    func recheck() {
        let value = storage.wrappedValue
        let stale = tracking.withLock { !$0.fired && $0.value != value }
        guard stale else { return }
        track()
        printValue()
    }

    /// Prints the value the tracking holds, under its lock: two threads that track again one after the other print in
    /// that order, so a value read before a change cannot be printed after the value read once it is in place.
    private func printValue() {
        tracking.withLock { say("observed \($0.value)") }
    }
}

/// A value behind an `NSLock` (a pthread mutex, which ThreadSanitizer sees; `Mutex` it does not).
final class Locked<Value>: @unchecked Sendable {  // `value` under `lock`
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
