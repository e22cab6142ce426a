// A store that calls back into the package from inside every call, for the tests of feeds and batches.
import Foundation
import Synchronization

@testable import WLStorage

/// A store in memory whose every call can run a hook of the test first: to call the feed from inside a call, to open
/// or release storages of the same store, to fail part of a batch. Its identity can change while it lives.
final class HostileStore: WLStorageStore, @unchecked Sendable {  // mutable state: `state`; hooks set once
    struct State {
        var values: [String: Data] = [:]
        var handlers: [UInt64: @Sendable (WLStorageStoreChange) -> Void] = [:]
        var nextHandler: UInt64 = 0
        var generation = 0
        var reads = 0
        var creates = 0
        var batches = 0
        var observeCalls = 0
    }

    struct Failure: Error {}

    let state = Lock(State())
    let name = "hostile:" + UUID().uuidString
    /// Whether the identity carries the generation (a store whose identity names its current connection).
    let identityFollowsGeneration: Bool

    var onObserve: (@Sendable (HostileStore) -> Void)?
    var onRead: (@Sendable (HostileStore, String) -> Void)?
    var onWrite: (@Sendable (HostileStore, String) -> Void)?
    var onBatch: (@Sendable (HostileStore, [WLStorageStoreWrite]) throws -> Void)?
    var onCreate: (@Sendable (HostileStore, String) -> Void)?

    init(identityFollowsGeneration: Bool = false) {
        ReportedErrors.install()
        self.identityFollowsGeneration = identityFollowsGeneration
    }

    var identity: String {
        guard identityFollowsGeneration else { return name }
        return name + "#" + String(state.withLock { $0.generation })
    }

    func read(key: String) throws -> Data? {
        onRead?(self, key)
        return state.withLock { state in
            state.reads += 1
            return state.values[key]
        }
    }

    func write(key: String, data: Data) throws {
        onWrite?(self, key)
        state.withLock { $0.values[key] = data }
    }

    func create(key: String, data: Data) throws -> Bool {
        onCreate?(self, key)
        return state.withLock { state in
            state.creates += 1
            guard state.values[key] == nil else { return false }
            state.values[key] = data
            return true
        }
    }

    func write(_ batch: [WLStorageStoreWrite]) throws {
        state.withLock { $0.batches += 1 }
        if let onBatch {
            try onBatch(self, batch)
        } else {
            for write in batch { try self.write(key: write.key, data: write.data) }
        }
    }

    func remove(key: String) throws {
        state.withLock { $0.values[key] = nil }
    }

    func keys() throws -> [String] {
        state.withLock { $0.values.keys.sorted() }
    }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        let id = state.withLock { state in
            state.observeCalls += 1
            defer { state.nextHandler += 1 }
            state.handlers[state.nextHandler] = changed
            return state.nextHandler
        }
        onObserve?(self)
        return WLStorageSubscription { [self] in
            let removed = self.state.withLock { $0.handlers.removeValue(forKey: id) }
            _ = removed
        }
    }

    // What tests do from outside.

    func report(_ change: WLStorageStoreChange) {
        for handler in state.withLock({ Array($0.handlers.values) }) { handler(change) }
    }

    func writeFromOutside(_ key: String, json: String) {
        state.withLock { $0.values[key] = Data(json.utf8) }
        report(.key(key))
    }

    func stored(_ key: String) -> String? {
        state.withLock { $0.values[key] }.map { String(decoding: $0, as: UTF8.self) }
    }

    func newGeneration() { state.withLock { $0.generation += 1 } }
    var feedCount: Int { state.withLock { $0.handlers.count } }
    var creates: Int { state.withLock { $0.creates } }
    var reads: Int { state.withLock { $0.reads } }
}

/// Holds storages for a hook of a store, which cannot keep them in its own (immutable) captures.
final class Keeper: @unchecked Sendable {  // guarded by `lock`
    private let lock = Lock<[any AnyObject & Sendable]>([])
    func keep(_ object: any AnyObject & Sendable) { lock.withLock { $0.append(object) } }
    func dropAll() {
        let dropped = lock.withLock { objects in
            defer { objects = [] }
            return objects
        }
        _ = dropped  // released here, outside the lock
    }
}
