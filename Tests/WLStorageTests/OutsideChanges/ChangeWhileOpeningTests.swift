// A change reported at the worst moment of a storage's opening: after it read its key and before its cell is there to
// be told, or while the last other storage of its store goes. The storage checks once more, and ends with the change.
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A store in memory with a change feed, that runs a hook, once, right after a read: as another program's change
/// landing between a storage's read and its registration.
private final class StoreChangedAfterRead: WLStorageStore {
    let identity = "changed-after-read:" + UUID().uuidString
    private struct State {
        var values: [String: Data] = [:]
        var handlers: [UInt64: @Sendable (WLStorageStoreChange) -> Void] = [:]
        var next: UInt64 = 0
        var afterRead: (@Sendable () -> Void)?
    }
    private let state = Lock(State())

    init() { ReportedErrors.install() }

    /// Runs `hook` after the next read, outside the lock.
    func afterNextRead(_ hook: @escaping @Sendable () -> Void) { state.withLock { $0.afterRead = hook } }

    var hookRan: Bool { state.withLock { $0.afterRead == nil } }

    func read(key: String) throws -> Data? {
        let (data, hook) = state.withLock { state in
            defer { state.afterRead = nil }
            return (state.values[key], state.afterRead)
        }
        hook?()
        return data
    }

    func write(key: String, data: Data) throws { state.withLock { $0.values[key] = data } }
    func remove(key: String) throws { state.withLock { $0.values[key] = nil } }
    func keys() throws -> [String] { state.withLock { Array($0.values.keys) } }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        let id = state.withLock { state in
            defer { state.next += 1 }
            state.handlers[state.next] = changed
            return state.next
        }
        return WLStorageSubscription { [self] in
            let removed = self.state.withLock { $0.handlers.removeValue(forKey: id) }
            _ = removed
        }
    }

    /// Another program's write, reported by the feed as `change`.
    func storeFromOutside(_ key: String, json: String, reporting change: WLStorageStoreChange) {
        state.withLock { $0.values[key] = Data(json.utf8) }
        for handler in state.withLock({ Array($0.handlers.values) }) { handler(change) }
    }
}

/// A custom backer with a change feed that reports a change while it is being subscribed to, or right after a read.
private final class BackerChangedWhileOpening: WLStorageObservableBacker, Sendable {
    let key = "changed-while-opening"
    private struct State {
        var value = 1
        var handlers: [@Sendable () -> Void] = []
        var changeOnSubscribe = false
        var changeAfterRead = false
    }
    private let state = Lock(State())

    init(changeOnSubscribe: Bool, changeAfterRead: Bool) {
        ReportedErrors.install()
        state.withLock {
            $0.changeOnSubscribe = changeOnSubscribe
            $0.changeAfterRead = changeAfterRead
        }
    }

    func read(defaultValueClosure: () -> Int) -> Int {
        let (value, change) = state.withLock { state in
            defer { state.changeAfterRead = false }
            return (state.value, state.changeAfterRead)
        }
        if change { changeFromOutside(to: 3) }
        return value
    }

    func write(value: Int) { state.withLock { $0.value = value } }

    func observeChanges(_ changed: @escaping @Sendable () -> Void) -> WLStorageSubscription {
        let change = state.withLock { state in
            state.handlers.append(changed)
            defer { state.changeOnSubscribe = false }
            return state.changeOnSubscribe
        }
        // Reported from inside the subscription, before the storage has read anything.
        if change { changeFromOutside(to: 2) }
        return WLStorageSubscription {}
    }

    func changeFromOutside(to value: Int) {
        state.withLock { $0.value = value }
        for handler in state.withLock({ $0.handlers }) { handler() }
    }
}

@Suite(.capturingOutput) struct ChangeWhileOpeningTests {
    @Test(arguments: [WLStorageStoreChange.key("k"), .everything])
    func aStoreChangeReportedBetweenTheReadAndTheRegistrationIsAdopted(change: WLStorageStoreChange) throws {
        let store = StoreChangedAfterRead()
        try store.write(key: "k", data: Data("1".utf8))
        store.afterNextRead { store.storeFromOutside("k", json: "2", reporting: change) }
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        try #require(store.hookRan, "the hook did not run")
        #expect(eventually(timeout: 30) { storage.wrappedValue == 2 }, "the storage has \(storage.wrappedValue)")
    }

    /// The last other storage of the store goes while this one reads: the feed, still used by this one, goes on.
    @Test func aStoreChangeAfterTheLastOtherStorageWentWhileThisOneReadIsAdopted() throws {
        let store = StoreChangedAfterRead()
        try store.write(key: "k", data: Data("1".utf8))
        let other = Lock<WLStorage<Int>?>(
            WLStorage(key: "other", defaultValue: 0, flushInterval: nil, store: store))
        store.afterNextRead {
            let released = other.withLock { storage -> WLStorage<Int>? in
                defer { storage = nil }
                return storage
            }
            _ = released
            store.storeFromOutside("k", json: "2", reporting: .key("k"))
        }
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        try #require(store.hookRan, "the hook did not run")
        #expect(eventually(timeout: 30) { storage.wrappedValue == 2 }, "the storage has \(storage.wrappedValue)")
        // And later changes still come.
        store.storeFromOutside("k", json: "5", reporting: .key("k"))
        #expect(eventually(timeout: 30) { storage.wrappedValue == 5 }, "the storage has \(storage.wrappedValue)")
    }

    @Test(arguments: [(true, false), (false, true), (true, true)])
    func aCustomBackersChangeReportedBeforeItsCellExistsIsAdopted(onSubscribe: Bool, afterRead: Bool) {
        let backer = BackerChangedWhileOpening(changeOnSubscribe: onSubscribe, changeAfterRead: afterRead)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
        let expected = afterRead ? 3 : 2
        #expect(
            eventually(timeout: 30) { storage.wrappedValue == expected }, "the storage has \(storage.wrappedValue)")
        backer.changeFromOutside(to: 7)
        #expect(eventually(timeout: 30) { storage.wrappedValue == 7 }, "the storage has \(storage.wrappedValue)")
    }
}
