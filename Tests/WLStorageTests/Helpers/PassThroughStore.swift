// A store of the tests' own that passes every call through to another store, as a user's wrapper would.
import Dispatch
import Foundation

@testable import WLStorage

/// A store that keeps its bytes in another store and passes every call through, as a user's logging or metrics wrapper
/// would: it offers no more than the protocol asks (no writes on condition even over a store that has them, a batch
/// written key by key), and its identity is the other store's, marked. Its next read can be held at a gate before it
/// reads.
final class PassThroughStore: WLStorageStore {
    let base: any WLStorageStore
    private let gate = Lock<(entered: DispatchSemaphore, open: DispatchSemaphore)?>(nil)

    init(base: some WLStorageStore) {
        self.base = base
    }

    var identity: String { "wrapped:" + base.identity }

    /// Holds the next read at a gate before it reads: `entered` is signalled when it gets there, and it goes on once
    /// `open` is.
    func holdNextRead() -> (entered: DispatchSemaphore, open: DispatchSemaphore) {
        let semaphores = (entered: DispatchSemaphore(value: 0), open: DispatchSemaphore(value: 0))
        gate.withLock { $0 = semaphores }
        return semaphores
    }

    func read(key: String) throws -> Data? {
        if let held = gate.withLock({ gate -> (entered: DispatchSemaphore, open: DispatchSemaphore)? in
            defer { gate = nil }
            return gate
        }) {
            held.entered.signal()
            held.open.wait()
        }
        return try base.read(key: key)
    }

    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        base.observeChanges(changed)
    }
}
