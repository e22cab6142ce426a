import Dispatch
import Foundation
import Testing

@testable import WLStorage

/// A store over a memory store that writes on condition, and whose reads can be held at a gate: a check for outside
/// changes that has started reading waits there while the test makes other changes.
private final class GatedStore: WLStorageConditionalStore {
    let base = MemoryStore()
    private let gate = Lock<(entered: DispatchSemaphore, open: DispatchSemaphore)?>(nil)
    private let afterConditionalWrite = Lock<(@Sendable () -> Void)?>(nil)

    var identity: String { base.identity }

    /// Holds the next read at the gate: `entered` is signalled when it gets there, and it goes on once `open` is.
    func holdNextRead() -> (entered: DispatchSemaphore, open: DispatchSemaphore) {
        let semaphores = (entered: DispatchSemaphore(value: 0), open: DispatchSemaphore(value: 0))
        gate.withLock { $0 = semaphores }
        return semaphores
    }

    /// Runs `body` once, right after the next write on condition has stored, before it returns.
    func afterNextConditionalWrite(_ body: @escaping @Sendable () -> Void) {
        afterConditionalWrite.withLock { $0 = body }
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

    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        let stored = base.contents.state.withLock { state in
            guard state.values[key] == expected else { return false }
            state.values[key] = data
            return true
        }
        if stored,
            let body = afterConditionalWrite.withLock({ hook -> (@Sendable () -> Void)? in
                defer { hook = nil }
                return hook
            })
        {
            body()
        }
        return stored
    }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        base.observeChanges(changed)
    }
}

/// A check for another program's change that runs while an update of the same storage is written: whatever the order
/// of the two, the storage ends on what the key holds.
@Suite struct CheckDuringAnUpdateTests {
    /// A check starts while an update's write is on its way, and reads only after the update has stored 6 and another
    /// program 7: the value it read came after the update, but the update moved the cell's version meanwhile, so the
    /// check does not adopt it. The storage must not stay on 6 while the key holds 7.
    @Test func aCheckThatReadsAfterAnUpdateWasWrittenEndsOnWhatTheKeyHolds() throws {
        let store = GatedStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 5
        storage.flush()
        #expect(store.base.stored("counter") == "5")

        // While the update's write is on its way, a change is reported: its check starts, and stops at the gate
        // before it reads (the gate is set after the update's own read).
        let gate = Lock<(entered: DispatchSemaphore, open: DispatchSemaphore)?>(nil)
        let entered = Lock(false)
        store.afterNextConditionalWrite {
            let held = store.holdNextRead()
            gate.withLock { $0 = held }
            store.base.report(.key("counter"))
            entered.withLock { $0 = held.entered.wait(timeout: .now() + 10) == .success }
        }
        storage.update { $0 += 1 }
        #expect(entered.withLock { $0 })
        #expect(store.base.stored("counter") == "6")
        // Another program stores 7 after the update, and says so while the check still waits.
        store.base.writeFromOutside("counter", json: "7")
        store.base.report(.key("counter"))

        gate.withLock { $0 }?.open.signal()
        #expect(eventually(timeout: 30) { storage.wrappedValue == 7 }, "the storage holds \(storage.wrappedValue)")
        #expect(store.base.stored("counter") == "7")
    }
}
