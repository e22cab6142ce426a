import Dispatch
import Foundation
import Testing

@testable import WLStorage

/// A store that writes on condition, over a ``MemoryStore``, whose next read from another thread than the one that
/// arms it can be held until it is released: a check of the storage's cell then stays in flight on that thread.
private final class HeldReadStore: WLStorageConditionalStore {
    let base = MemoryStore()
    private let hold = Lock<(armed: Bool, holding: Bool)>((false, false))
    private let released = DispatchSemaphore(value: 0)

    var identity: String { base.identity }

    /// Holds the next read until ``release()``.
    func holdNextRead() { hold.withLock { $0.armed = true } }

    /// Whether a read is held now.
    var isHolding: Bool { hold.withLock { $0.holding } }

    func release() { released.signal() }

    func read(key: String) throws -> Data? {
        let held = hold.withLock { state -> Bool in
            guard state.armed else { return false }
            state = (false, true)
            return true
        }
        if held {
            released.wait()
            hold.withLock { $0.holding = false }
        }
        return try base.read(key: key)
    }

    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        try base.write(key: key, data: data, ifItHolds: expected)
    }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }
    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        base.observeChanges(changed)
    }
}

/// An update that stored its value holds it when it returns: also when the cell took another program's value while
/// the closure ran and a check of the key is in flight on another thread as the update ends.
// The time limit catches a hang; it counts the wait for each test's turn too (see TestThreads.swift).
@Suite(.capturingOutput, .timeLimit(.minutes(30)))
struct UpdateReadsItsOwnValueTests {
    @Test func anUpdateHoldsWhatItStoredWhenItReturnsWhileACheckRunsElsewhere() throws {
        let store = HeldReadStore()
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 1
        storage.flush()
        // The held check is let go of once the update waits for the cell (an update that waited for a release after
        // it returned would never return), or once the test has looked at what the update left.
        let looked = Lock(false)
        startThread {
            _ = eventually(timeout: 60) {
                looked.withLock { $0 } || storage.cell.state.withLock { !($0.extras?.waiters.isEmpty ?? true) }
            }
            store.release()
        }
        storage.update { value in
            // Another program writes 2, which the storage takes, and then 1 again, so that the update's write, on
            // condition that the key holds the 1 it read, is stored. The check of that second change (the feed's, on
            // a thread of its own) is held in flight as the update ends.
            store.base.writeFromOutside("k", json: "2")
            #expect(eventually { storage.wrappedValue == 2 }, "the storage did not take the change")
            store.holdNextRead()
            store.base.writeFromOutside("k", json: "1")
            #expect(eventually { store.isHolding }, "no check read the key")
            value = 10
        }
        #expect(storage.wrappedValue == 10, "the update returned holding \(storage.wrappedValue)")
        #expect(store.base.stored("k") == "10")
        looked.withLock { $0 = true }
        #expect(eventually { storage.wrappedValue == 10 })
    }
}
