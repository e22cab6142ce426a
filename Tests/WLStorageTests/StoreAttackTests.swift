// Attacks on stores (`WLStorageStore`, the JSON layer of `StoreBacker`, the feeds of `StoreFeeds`, batches in
// `flushAll`, custom backers with a change feed), written against the commit that added them (af2fdf2). The suites
// named `StoreAttackFault…` state a promise and fail on that commit; the suites named `StoreAttackRegression…` are
// attacks that found nothing, kept so that they go on finding nothing. Every wait is bounded: a hang fails its test.
// Every fault found is fixed: the known versions (one version remembered), the identity (read once), empty bytes (a
// key that holds them is taken), the feed-start hang (a storage created inside `observeChanges` does not wait for it),
// the kept-aside removal (`remove(key:ifItHolds:)`) and the report storm (one round of checks queued per store).
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

// MARK: - Helpers

/// A store in memory whose every call can run a hook of the test first: to call the feed from inside a call, to open
/// or release storages of the same store, to fail part of a batch. Its identity can change while it lives.
private final class HostileStore: WLStorageStore, @unchecked Sendable {  // mutable state: `state`; hooks set once
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

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageObservation? {
        let id = state.withLock { state in
            state.observeCalls += 1
            defer { state.nextHandler += 1 }
            state.handlers[state.nextHandler] = changed
            return state.nextHandler
        }
        onObserve?(self)
        return WLStorageObservation { [self] in
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

/// Runs `body` on a thread of its own; returns whether it finished within `seconds`. A body that hangs is left
/// hanging, and the test fails instead of the suite.
private func finishes(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        body()
        done.signal()
    }
    return done.wait(timeout: .now() + seconds) == .success
}

/// Holds storages for a hook of a store, which cannot keep them in its own (immutable) captures.
private final class Keeper: @unchecked Sendable {  // guarded by `lock`
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

// MARK: - Faults

/// "The value stored last wins": a store's change is adopted unless a local change is pending.
///
/// `StoreBacker` (and `ObservedBacker`) tell their own versions from others' by `KnownBytes`, which remembers two
/// hashes: the last bytes written and the last bytes read. A change reported by the feed whose bytes equal either is
/// taken for "unchanged". So when another program stores again a version this backer read (or wrote) earlier, after
/// the backer has since written (or read) another, the change is ignored: the storage keeps its value while the store
/// holds the other one, for good (no later event brings it back unless the bytes change again).
@Suite(.capturingOutput) struct StoreAttackFaultKnownVersionsTests {
    @Test func anOutsideChangeBackToTheValueReadAtStartIsAdopted() {
        let store = MemoryStore()
        store.writeFromOutside("theme", json: #""dark""#)
        let storage = WLStorage(key: "theme", defaultValue: "", flushInterval: nil, store: store)
        #expect(storage.wrappedValue == "dark")
        storage.wrappedValue = "light"
        storage.flush()
        #expect(store.stored("theme") == #""light""#)

        // Another program sets it back: the store holds "dark", last.
        let checks = storage.cell.externalChecks
        store.writeFromOutside("theme", json: #""dark""#)
        #expect(eventually { storage.cell.externalChecks > checks && !storage.hasPendingChanges })
        #expect(
            eventually(timeout: 3) { storage.wrappedValue == "dark" }, "the storage kept a value the store replaced")
        #expect(store.stored("theme") == #""dark""#)
    }

    @Test func anOutsideChangeBackToAValueWrittenEarlierIsAdopted() {
        let store = MemoryStore()
        store.writeFromOutside("mode", json: #""a""#)
        let storage = WLStorage(key: "mode", defaultValue: "", flushInterval: nil, store: store)
        storage.wrappedValue = "b"
        storage.flush()
        store.writeFromOutside("mode", json: #""c""#)
        #expect(eventually { storage.wrappedValue == "c" })
        // Another program stores "b" again: the store holds "b", last.
        store.writeFromOutside("mode", json: #""b""#)
        #expect(eventually(timeout: 3) { storage.wrappedValue == "b" }, "the storage kept a value the store replaced")
    }

    @Test func aCustomBackersChangeBackToTheValueReadAtStartIsAdopted() {
        let backer = ObservableMemoryBacker(stored: 1)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
        #expect(storage.wrappedValue == 1)
        storage.wrappedValue = 2
        storage.flush()
        #expect(backer.stored == 2)
        backer.setFromOutside(1)
        #expect(eventually(timeout: 3) { storage.wrappedValue == 1 }, "the storage kept a value the backer replaced")
    }
}

/// "No user code runs under a package lock": a store's `observeChanges` is user code, and it may open a storage of
/// its own store (to keep its cursor, say).
///
/// `StoreFeeds.use` puts a placeholder feed in its table and calls `observeChanges` with the placeholder's
/// `started` group entered; every other `use` of that identity waits on the group. A storage of the same store
/// opened from inside `observeChanges` (on the thread that is starting the feed) waits for a group that only its own
/// thread can leave: the program hangs in the first storage's initializer.
@Suite(.capturingOutput) struct StoreAttackFaultFeedStartTests {
    @Test func aStorageOfTheSameStoreOpenedInsideObserveChangesDoesNotHang() {
        let store = HostileStore()
        let keeper = Keeper()
        store.onObserve = { store in
            // The store keeps the cursor of its feed in a storage of its own.
            keeper.keep(WLStorage(key: "cursor", defaultValue: 0, flushInterval: nil, store: store))
        }
        let keeperOfFirst = Keeper()
        let finished = finishes(within: 5) {
            keeperOfFirst.keep(WLStorage(key: "value", defaultValue: 1, flushInterval: nil, store: store))
        }
        #expect(finished, "the storage's initializer hangs: the nested one waits for the feed its own thread starts")
        guard finished else { return }
        keeper.dropAll()
        keeperOfFirst.dropAll()
        #expect(eventually { store.feedCount == 0 })
    }
}

/// "The feed is started by the first storage and cancelled with the last" (`StoreFeeds`).
///
/// The store's `identity` is read anew at each use: `StoreFeeds.use` reads it, the registry keys the cell by
/// `StorageCell.storeKey` (which reads it again on every access), and the cell's `deinit` releases the feed under
/// whatever it says then. A store whose identity is computed from state that changes (the connection it is on, a
/// path resolved later) has its feed started under one identity and released under another: the feed is never
/// cancelled, and a storage opened after the change gets a cell of its own, a second value for the same key.
@Suite(.capturingOutput) struct StoreAttackFaultIdentityTests {
    @Test func theFeedEndsWithTheLastStorageWhenTheIdentityChangedMeanwhile() {
        let store = HostileStore(identityFollowsGeneration: true)
        do {
            let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
            #expect(store.feedCount == 1)
            store.newGeneration()  // the store reconnected
            storage.wrappedValue = 1
        }
        #expect(store.stored("n") == "1")
        #expect(eventually(timeout: 3) { store.feedCount == 0 }, "the feed outlives every storage of the store")
    }

    @Test func aChangeToEveryKeyReachesTheStorageWhenTheIdentityChangedMeanwhile() {
        let store = HostileStore(identityFollowsGeneration: true)
        store.writeFromOutside("n", json: "1")
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
        #expect(storage.wrappedValue == 1)
        store.newGeneration()  // the store reconnected; its feed, started before, goes on
        store.state.withLock { $0.values["n"] = Data("4".utf8) }
        store.report(.everything)  // events may have been lost while reconnecting
        #expect(eventually(timeout: 3) { storage.wrappedValue == 4 }, "the feed's report reached no cell")
    }
}

/// "A default is saved only where nothing is stored", and a released storage's cell is kept only "until the work is
/// done".
///
/// `StoreBacker.readStored` counts empty bytes as nothing stored, so the cell starts `.defaultUnsaved`; the store's
/// `create` rightly refuses (something is stored), the read after it finds "nothing" again, and
/// `StoreBacker.entryExists` is always `false`, so `StorageCell.perform(.createDefault)` returns `.read(.absent)`:
/// the save failed, to be retried. It never succeeds. The cell tries again forever with the backoff, and once its
/// last storage is released it is orphaned and kept by the registry for good, with the store's feed.
@Suite(.capturingOutput) struct StoreAttackFaultEmptyBytesTests {
    @Test func aKeyHoldingEmptyBytesDoesNotKeepItsReleasedCellAndFeedForever() {
        let store = HostileStore()
        store.writeFromOutside("k", json: "")
        weak var cell: StorageCell<Int>?
        do {
            let storage = WLStorage(key: "k", defaultValue: 3, flushInterval: 1, store: store)
            cell = storage.cell
            #expect(storage.wrappedValue == 3)
            storage.flush()
        }
        #expect(store.stored("k") == "")  // left alone: a default is not saved over what is stored
        #expect(eventually(timeout: 3) { cell == nil }, "the released cell is kept, retrying its default for good")
        #expect(eventually(timeout: 1) { store.feedCount == 0 }, "the store's feed outlives every storage")
    }
}

// MARK: - Regressions: attacks that found nothing

/// A feed called synchronously from inside `observeChanges`, `read`, `write` and a batch: no lock is held there, so
/// nothing is recursive, and every change still lands.
@Suite(.capturingOutput) struct StoreAttackRegressionReentrantFeedTests {
    @Test func aFeedCalledFromInsideEveryCallOfTheStoreNeitherCrashesNorLosesAChange() {
        let store = HostileStore()
        store.onObserve = { store in
            store.report(.everything)
            store.report(.key("a"))
        }
        store.onRead = { store, key in store.report(.key(key)) }
        store.onWrite = { store, key in store.report(.key(key)) }
        store.onBatch = { store, batch in
            store.report(.everything)
            for write in batch { try store.write(key: write.key, data: write.data) }
            store.report(.everything)
        }
        store.writeFromOutside("a", json: "1")
        let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        #expect(a.wrappedValue == 1)
        a.wrappedValue = 10
        b.wrappedValue = 20
        flushAllStores([store])
        #expect(store.stored("a") == "10")
        #expect(store.stored("b") == "20")
        store.writeFromOutside("b", json: "21")
        #expect(eventually { b.wrappedValue == 21 })
        #expect(a.wrappedValue == 10)
    }

    /// A storage opened and released from inside the store's `write` (on the cell's own job) and from inside a
    /// batch: the nested flush sees its own thread's job and returns.
    @Test func storagesOpenedAndReleasedInsideWriteAndBatchDoNotHang() {
        let store = HostileStore()
        store.onWrite = { store, key in
            let nested = WLStorage(key: key, defaultValue: -1, flushInterval: nil, store: store)
            nested.flush()
            _ = nested.wrappedValue
        }
        store.onBatch = { store, batch in
            for write in batch {
                let nested = WLStorage(key: write.key, defaultValue: -1, flushInterval: nil, store: store)
                nested.flush()
                store.state.withLock { $0.values[write.key] = write.data }
            }
        }
        let finished = finishes(within: 10) {
            let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
            let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
            a.wrappedValue = 1
            a.flush()
            a.wrappedValue = 2
            b.wrappedValue = 3
            flushAllStores([store])
        }
        #expect(finished)
        #expect(store.stored("a") == "2")
        #expect(store.stored("b") == "3")
        #expect(eventually { store.feedCount == 0 })
    }
}

/// Batches of `flushAll`: one that calls `flushAll` and `flush()` from inside, and one that writes some keys and
/// then throws.
@Suite(.capturingOutput) struct StoreAttackRegressionBatchTests {
    @Test func aBatchThatCallsFlushAllAndFlushFromInsideReturns() {
        let store = HostileStore()
        let holder = Keeper()
        let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        holder.keep(a)
        store.onBatch = { [a] store, batch in
            flushAllStores([store])
            a.flush()
            for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
        }
        a.wrappedValue = 1
        b.wrappedValue = 2
        #expect(finishes(within: 10) { flushAllStores([store]) }, "flushAll from inside a batch hangs")
        #expect(store.stored("a") == "1")
        #expect(store.stored("b") == "2")
        #expect(!a.hasPendingChanges && !b.hasPendingChanges)
    }

    @Test func aBatchThatThrowsAfterWritingSomeKeysLosesNothing() {
        let store = HostileStore()
        let failing = Atomic<Bool>(true)
        store.onBatch = { store, batch in
            for (index, write) in batch.enumerated() {
                if index == 1 && failing.load(ordering: .sequentiallyConsistent) { throw HostileStore.Failure() }
                store.state.withLock { $0.values[write.key] = write.data }
            }
        }
        for key in ["a", "b", "c"] { store.writeFromOutside(key, json: "0") }
        let storages = ["a", "b", "c"].map { WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store) }
        for (index, storage) in storages.enumerated() { storage.wrappedValue = index + 1 }
        // The batch fails; the cells are then flushed one by one, which works.
        flushAllStores([store])
        failing.store(false, ordering: .sequentiallyConsistent)
        flushAllStores([store])
        for (index, key) in ["a", "b", "c"].enumerated() { #expect(store.stored(key) == "\(index + 1)") }
        #expect(storages.allSatisfy { !$0.hasPendingChanges })
        // The store's feed reports its own partial batch: not taken for another program's change.
        store.report(.everything)
        usleep(100_000)
        for (index, storage) in storages.enumerated() { #expect(storage.wrappedValue == index + 1) }
    }

    /// A store that cannot be read at start: `takeBatchWrite` takes no change made on the default, so `flushAll`'s
    /// batch writes nothing over the stored value.
    @Test func aStoreUnreadableAtStartGetsNothingWrittenByFlushAllsBatch() {
        let store = MemoryStore()
        store.writeFromOutside("a", json: "9")
        store.writeFromOutside("b", json: "9")
        store.failReads(true)
        let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
        store.failReads(false)
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        store.failReads(true)
        a.wrappedValue = 1  // based on the default
        b.wrappedValue = 2
        flushAllStores([store])
        flushAllStores([store])
        #expect(store.stored("a") == "9")
        #expect(store.stored("b") == "2")
        store.failReads(false)
        flushAllStores([store])
        #expect(store.stored("a") == "9")
        #expect(a.wrappedValue == 9)
    }
}

/// A batch that a store wrote in part: what it says it stored counts as written.
@Suite(.capturingOutput) struct StoreBatchPartTests {
    @Test func aBatchThatSaysItStoredItsFirstWritesLeavesOnlyTheOthersPending() {
        let store = HostileStore()
        let stored = Lock<[String]>([])
        let failing = Atomic<Bool>(true)
        store.onBatch = { store, batch in
            guard failing.load(ordering: .sequentiallyConsistent) else {
                for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
                return
            }
            // The first two writes are stored, then the store fails and says so.
            for write in batch.prefix(2) {
                store.state.withLock { $0.values[write.key] = write.data }
                stored.withLock { $0.append(write.key) }
            }
            var error = WLStorageError(code: .writeFailed, message: "the deadline passed after two writes")
            error.storedWrites = 2
            throw error
        }
        for key in ["a", "b", "c"] { store.writeFromOutside(key, json: "0") }
        let storages = ["a", "b", "c"].map { WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store) }
        for (index, storage) in storages.enumerated() { storage.wrappedValue = index + 1 }
        flushAllStores([store])
        let written = stored.withLock { $0 }
        #expect(written.count == 2)
        for (key, storage) in zip(["a", "b", "c"], storages) {
            #expect(storage.hasPendingChanges == !written.contains(key), "\(key)")
        }
        failing.store(false, ordering: .sequentiallyConsistent)
        flushAllStores([store])
        for (index, key) in ["a", "b", "c"].enumerated() { #expect(store.stored(key) == "\(index + 1)") }
        #expect(storages.allSatisfy { !$0.hasPendingChanges })
    }
}

/// The feed racing the storage's creation, and the storage's release.
@Suite(.capturingOutput) struct StoreAttackRegressionFeedTests {
    /// Another program's change lands right after the initial read, before the cell is registered: the event finds
    /// no cell, and the event count makes the new cell check once more.
    @Test func aChangeReportedBetweenTheInitialReadAndTheCellIsAdopted() {
        let store = HostileStore()
        store.writeFromOutside("k", json: "1")
        let once = Atomic<Bool>(false)
        store.onRead = { store, key in
            guard !once.exchange(true, ordering: .sequentiallyConsistent) else { return }
            // The read returns "1" below; the change reported here comes after it in the store's order.
            Thread.detachNewThread {
                usleep(2_000)
                store.writeFromOutside(key, json: "2")
            }
            usleep(10_000)
        }
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        #expect(eventually { storage.wrappedValue == 2 })
    }

    @Test func anObservationCancelledFromManyThreadsAtOnceStopsOnce() {
        for _ in 0..<200 {
            let stops = Atomic<Int>(0)
            let observation = WLStorageObservation { stops.add(1, ordering: .relaxed) }
            DispatchQueue.concurrentPerform(iterations: 4) { _ in observation.cancel() }
            #expect(stops.load(ordering: .relaxed) == 1)
        }
    }

    /// A storage released from inside its own `onChange` handler while the feed reports changes, and the feed's
    /// observation released by the last storage.
    @Test func aStorageReleasedFromItsOnChangeWhileTheFeedFiresEndsTheFeed() {
        let store = HostileStore()
        let keeper = Keeper()
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        keeper.keep(storage)
        let handled = Atomic<Bool>(false)
        let handler = storage.onChange(queue: .global()) { _ in
            keeper.dropAll()
            handled.store(true, ordering: .sequentiallyConsistent)
        }
        _ = handler
        let stop = Atomic<Bool>(false)
        Thread.detachNewThread {
            var n = 0
            while !stop.load(ordering: .sequentiallyConsistent) {
                n += 1
                store.writeFromOutside("k", json: "\(n)")
                store.report(.everything)
            }
        }
        _ = consume storage
        #expect(eventually { handled.load(ordering: .sequentiallyConsistent) })
        handler.cancel()
        #expect(eventually { store.feedCount == 0 })
        stop.store(true, ordering: .sequentiallyConsistent)
    }

    /// Storages opened and released on several threads while the feed reports every key in a loop and `flushAll`
    /// runs: nothing crashes, no value is lost, and the feed ends with the last storage.
    @Test func releasesFlushAllAndAStormOfEverythingEndWithTheFeedCancelled() {
        let store = HostileStore()
        let stop = Atomic<Bool>(false)
        let storms = DispatchGroup()
        DispatchQueue.global().async(group: storms) {
            while !stop.load(ordering: .sequentiallyConsistent) { store.report(.everything) }
        }
        DispatchQueue.global().async(group: storms) {
            while !stop.load(ordering: .sequentiallyConsistent) {
                flushAllStores([store])
                usleep(1_000)
            }
        }
        let finished = finishes(within: 30) {
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for round in 0..<100 {
                    let storage = WLStorage(
                        key: "k\(thread)", defaultValue: -1, flushInterval: round % 2 == 0 ? nil : 0, store: store)
                    storage.wrappedValue = round
                    if round % 3 == 0 { storage.flush() }
                }
            }
        }
        stop.store(true, ordering: .sequentiallyConsistent)
        #expect(storms.wait(timeout: .now() + 10) == .success)
        #expect(finished)
        for thread in 0..<4 { #expect(eventually { store.stored("k\(thread)") == "99" }) }
        #expect(eventually { store.feedCount == 0 })
    }
}

/// Prefixes that overlap, nest or are empty, and keys that look like kept-aside keys: each key of the root store
/// has one cell, whatever path led to it.
@Suite(.capturingOutput) struct StoreAttackRegressionPrefixTests {
    @Test func overlappingAndNestedPrefixesShareTheRootKeysCell() {
        let store = MemoryStore()
        let root = WLStorage(key: "a.b.c", defaultValue: 0, flushInterval: nil, store: store)
        let empty = WLStorage(key: "a.b.c", defaultValue: 0, flushInterval: nil, store: store.prefixed(""))
        let nested = WLStorage(
            key: "c", defaultValue: 0, flushInterval: nil, store: store.prefixed("a.").prefixed("b."))
        let overlapping = WLStorage(key: "b.c", defaultValue: 0, flushInterval: nil, store: store.prefixed("a."))
        nested.wrappedValue = 7
        #expect(root.wrappedValue == 7 && empty.wrappedValue == 7 && overlapping.wrappedValue == 7)
        overlapping.flush()
        #expect(store.stored("a.b.c") == "7")
        #expect(store.stored("b.a.c") == nil)
        store.writeFromOutside("a.b.c", json: "8")
        #expect(eventually { nested.wrappedValue == 8 })
    }

    @Test func aKeyNamedLikeAKeptAsideKeyIsAnOrdinaryKey() throws {
        let store = MemoryStore()
        let aside = "k~corrupt-20240101T000000Z-0123456789abcdef"
        store.writeFromOutside("k", json: "not json")
        store.writeFromOutside(aside, json: "5")
        let k = WLStorage(key: "k", defaultValue: 1, flushInterval: nil, store: store)
        let keptAside = WLStorage(key: aside, defaultValue: 0, flushInterval: nil, store: store)
        #expect(k.wrappedValue == 1)
        #expect(keptAside.wrappedValue == 5)
        #expect(store.stored(aside) == "5")  // not replaced by the new kept-aside copy
        let asides = try store.keys().filter { $0.hasPrefix("k~corrupt-") && $0 != aside }
        #expect(asides.count == 1)
        #expect(asides.first.flatMap(store.stored) == "not json")
    }
}

// MARK: - More faults

/// "Bytes that do not decode are kept aside" and another program's value is never lost.
///
/// `StoreBacker.keepAside` copies the undecodable bytes to a `~corrupt-` key, then removes the key unconditionally
/// (`store.remove(key:)`). When another program stores a good value in between (the store is shared, as stores are
/// meant to be), that value is removed: it is neither kept aside nor adopted, and the storage goes on with its
/// default. The file backer does not lose it: it moves whatever stands at the name aside with a rename.
@Suite(.capturingOutput) struct StoreAttackFaultKeepAsideTests {
    @Test func aGoodValueStoredWhileBadBytesAreKeptAsideIsNotRemoved() throws {
        let store = HostileStore()
        store.writeFromOutside("k", json: "not json")
        store.onCreate = { store, key in
            // Another program repairs the key just as the bad bytes are being copied aside.
            if key.contains("~corrupt-") { store.state.withLock { $0.values["k"] = Data("42".utf8) } }
        }
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        let keptAside = try store.keys().filter { $0.hasPrefix("k~corrupt-") }
        #expect(keptAside.count == 1)
        let survived = store.stored("k") == "42" || keptAside.contains { store.stored($0) == "42" }
        #expect(survived || storage.wrappedValue == 42, "another program's value was removed and is lost")
    }
}

// MARK: - More regressions

/// A value is released outside every lock: its `deinit` may read and set the very storage.
private final class Touchy: Codable, Sendable {
    static let target = Lock<WLStorage<Touchy>?>(nil)
    static let touched = Atomic<Int>(0)
    let n: Int
    init(_ n: Int) { self.n = n }
    deinit {
        guard Self.touched.add(1, ordering: .relaxed).newValue < 50 else { return }
        let storage = Self.target.withLock { $0 }
        if let storage {
            _ = storage.wrappedValue
            _ = storage.hasPendingChanges
            if n == 1 { storage.wrappedValue = Touchy(-1) }
            storage.flush()
        }
    }
}

@Suite(.capturingOutput, .serialized) struct StoreAttackRegressionValueDeinitTests {
    @Test func valuesWhoseDeinitTouchesTheStorageAreReleasedOutsideTheLock() {
        let store = MemoryStore()
        store.writeFromOutside("t", json: #"{"n":1}"#)
        let storage = WLStorage(key: "t", defaultValue: Touchy(0), flushInterval: nil, store: store)
        Touchy.target.withLock { $0 = storage }
        defer {
            let storage = Touchy.target.withLock { target in
                defer { target = nil }
                return target
            }
            _ = storage
        }
        storage.wrappedValue = Touchy(2)  // releases the value read, whose deinit sets the storage
        #expect(storage.wrappedValue.n == -1)
        storage.flush()
        #expect(store.stored("t") == #"{"n":-1}"#)
        store.writeFromOutside("t", json: #"{"n":3}"#)  // adopted: releases the value in memory
        #expect(eventually { storage.wrappedValue.n == 3 })
        store.removeFromOutside("t")  // back to the default: releases the value in memory
        #expect(eventually { storage.wrappedValue.n == 0 })
        #expect(Touchy.touched.load(ordering: .relaxed) > 0)
    }
}

@Suite(.capturingOutput) struct StoreAttackRegressionMoreTests {
    /// One value of a batch that cannot be encoded fails alone; the others are written.
    @Test func aBatchWithAnUnencodableValueWritesTheOthers() {
        let store = MemoryStore()
        let good = WLStorage(key: "good", defaultValue: 0.0, flushInterval: nil, store: store)
        let bad = WLStorage(key: "bad", defaultValue: 0.0, flushInterval: nil, store: store)
        let other = WLStorage(key: "other", defaultValue: 0.0, flushInterval: nil, store: store)
        flushAllStores([store])
        good.wrappedValue = 1.5
        bad.wrappedValue = .nan
        other.wrappedValue = 2.5
        flushAllStores([store])
        #expect(store.stored("good") == "1.5")
        #expect(store.stored("other") == "2.5")
        #expect(bad.hasPendingChanges)
        #expect(bad.lastError?.code == .encodingFailed)
    }

    /// A storage of the same key opened (and changed, and released) from inside the store's read of the first
    /// storage's initializer: the first joins the cell the nested one made.
    @Test func aStorageOfTheSameKeyOpenedInsideTheInitialReadIsJoined() {
        let store = HostileStore()
        let once = Atomic<Bool>(false)
        let keeper = Keeper()
        store.onRead = { store, key in
            guard !once.exchange(true, ordering: .sequentiallyConsistent) else { return }
            let nested = WLStorage(key: key, defaultValue: 0, flushInterval: nil, store: store)
            nested.wrappedValue = 5
            keeper.keep(nested)
        }
        let finished = finishes(within: 10) {
            let outer = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
            #expect(outer.wrappedValue == 5)
            outer.wrappedValue = 6
            keeper.dropAll()
            outer.flush()
        }
        #expect(finished)
        #expect(store.stored("k") == "6")
        #expect(eventually { store.feedCount == 0 })
    }

    /// A custom backer whose feed fires from inside `observeChanges` (before the cell exists), and whose
    /// observation's cancellation calls `flushAll` and opens a storage of the same backer.
    @Test func aCustomBackersFeedFiringEarlyAndCancellingIntoTheStorageIsHarmless() {
        final class EagerBacker: WLStorageObservableBacker, Sendable {
            let key = "eager"
            let value = Lock<Int?>(1)
            let cancels = Atomic<Int>(0)
            let nested = Lock<WLStorage<Int>?>(nil)
            func read(defaultValueClosure: () -> Int) -> Int { value.withLock { $0 } ?? defaultValueClosure() }
            func write(value: Int) { self.value.withLock { $0 = value } }
            func observeChanges(_ changed: @escaping @Sendable () -> Void) -> WLStorageObservation {
                value.withLock { $0 = 2 }  // changed between the start of the feed and the first read
                changed()
                changed()
                return WLStorageObservation { [self] in
                    guard cancels.add(1, ordering: .relaxed).newValue == 1 else { return }
                    flushAllStores([])  // a custom backer has no store: this walks every cell and flushes none
                    let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: self)
                    storage.wrappedValue = 9
                    storage.flush()
                }
            }
        }
        ReportedErrors.install()
        let backer = EagerBacker()
        let finished = finishes(within: 10) {
            let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
            #expect(storage.wrappedValue == 2)
            storage.wrappedValue = 3
        }
        #expect(finished)
        #expect(eventually { backer.cancels.load(ordering: .relaxed) >= 1 })
        #expect(eventually { backer.value.withLock { $0 } == 9 })
    }
}

/// "Reporting a change that was not one ... costs one read of the key" — and no more than that, however fast the
/// feed reports.
///
/// `StoreFeeds.changed` hands every report to `FileMonitor.scheduleChecks`, which queues one block per cell per report
/// on the concurrent queue of checks: nothing coalesces a check already queued for a cell. A feed that reports faster
/// than the checks run (a busy `LISTEN` channel, `.everything` after each reconnection attempt of a flapping
/// connection) grows the queue without bound: measured here, 200,000 reports of `.everything` to 20 storages queued
/// 4,000,000 checks, grew the process by 570 MB, and took more than 80 s of both cores to drain, long after the feed
/// went quiet. A check that has not started yet reads the key as it is when it runs, so a second one queued behind it
/// finds nothing new.
@Suite(.capturingOutput) struct StoreAttackFaultReportStormTests {
    @Test func aBurstOfReportsCostsAboutOneReadPerStorageNotOnePerReport() {
        let store = HostileStore()
        // Kept small: the queue of checks is the process's, and a flood of it delays other tests' checks.
        let storages = (0..<4).map { WLStorage(key: "k\($0)", defaultValue: 0, flushInterval: nil, store: store) }
        flushAllStores([store])
        let before = store.reads
        let reports = 5_000
        for _ in 0..<reports { store.report(.everything) }
        // Wait until the checks have drained: the reads stop growing (at most 30 s).
        var last = -1
        let drained = eventually(timeout: 30) {
            let now = store.reads
            defer { last = now }
            if now == last { return true }
            usleep(300_000)
            return false
        }
        #expect(drained)
        let reads = store.reads - before
        #expect(reads <= reports, "\(reports) reports to \(storages.count) storages cost \(reads) reads")
    }
}

@Suite(.capturingOutput) struct StoreAttackRegressionEncodeTests {
    /// A value whose encoding (run by `takeBatchWrite` with the cell busy on the flushing thread) calls `flushAll` and
    /// flushes its own storage: both return, and every value is written.
    @Test func aValueWhoseEncodingFlushesEverythingInsideABatchDoesNotHang() {
        struct Loud: Codable, Sendable {
            var n: Int
            static let storage = Lock<WLStorage<Loud>?>(nil)
            static let store = MemoryStore()
            func encode(to encoder: any Encoder) throws {
                if n > 0 {
                    flushAllStores([Self.store])
                    Self.storage.withLock { $0 }?.flush()
                }
                var container = encoder.singleValueContainer()
                try container.encode(n)
            }
            init(n: Int) { self.n = n }
            init(from decoder: any Decoder) throws { n = try decoder.singleValueContainer().decode(Int.self) }
        }
        let store = Loud.store
        let loud = WLStorage(key: "loud", defaultValue: Loud(n: 0), flushInterval: nil, store: store)
        let quiet = WLStorage(key: "quiet", defaultValue: 0, flushInterval: nil, store: store)
        Loud.storage.withLock { $0 = loud }
        defer {
            let storage = Loud.storage.withLock { target in
                defer { target = nil }
                return target
            }
            _ = storage
        }
        loud.wrappedValue = Loud(n: 1)
        quiet.wrappedValue = 2
        #expect(finishes(within: 10) { flushAllStores([store]) })
        #expect(store.stored("loud") == "1")
        #expect(store.stored("quiet") == "2")
    }
}

@Suite(.capturingOutput) struct StoreAttackRegressionReleaseInBatchTests {
    /// The last storage of a batched key released from inside the batch (on the flushing thread, whose job holds the
    /// cell): its flush sees its own job and returns, the cell is kept until the batch ends, and then let go with the
    /// feed.
    @Test func theLastStorageOfABatchedKeyReleasedInsideTheBatchIsWrittenAndLetGo() {
        let store = HostileStore()
        let keeper = Keeper()
        weak var cell: StorageCell<Int>?
        do {
            let a = WLStorage(key: "a", defaultValue: 0, flushInterval: nil, store: store)
            cell = a.cell
            keeper.keep(a)
            a.wrappedValue = 1
        }
        let b = WLStorage(key: "b", defaultValue: 0, flushInterval: nil, store: store)
        b.wrappedValue = 2
        store.onBatch = { store, batch in
            keeper.dropAll()
            for write in batch { store.state.withLock { $0.values[write.key] = write.data } }
        }
        #expect(finishes(within: 10) { flushAllStores([store]) })
        keeper.dropAll()  // when another test's flushAll wrote "a" alone, before the batch
        #expect(store.stored("a") == "1")
        #expect(store.stored("b") == "2")
        #expect(eventually { cell == nil })
        #expect(eventually { store.feedCount == 1 })
        _ = b
    }
}
