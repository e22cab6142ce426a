// A store's feed of changes: started once, ended with the last storage, and safe whatever it reports and whenever.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// "The value stored last wins": a store's change is adopted unless a local change is pending.
///
/// A backer tells its own versions from others' by the one version it saw last (`KnownVersions`): a change reported by
/// the feed whose bytes are that version is taken for "unchanged", and any other is a change. So when another program
/// stores again a version this backer read (or wrote) earlier, after it has since written (or read) another, the
/// change is adopted: a backer that remembered every version it saw would keep its value while the store holds the
/// other one, for good.
@Suite(.capturingOutput) struct StoreFeedKnownVersionsTests {
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
            eventually(timeout: 30) { storage.wrappedValue == "dark" }, "the storage kept a value the store replaced")
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
        #expect(eventually(timeout: 30) { storage.wrappedValue == "b" }, "the storage kept a value the store replaced")
    }

    @Test func aCustomBackersChangeBackToTheValueReadAtStartIsAdopted() {
        let backer = ObservableMemoryBacker(stored: 1)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
        #expect(storage.wrappedValue == 1)
        storage.wrappedValue = 2
        storage.flush()
        #expect(backer.stored == 2)
        backer.setFromOutside(1)
        #expect(eventually(timeout: 30) { storage.wrappedValue == 1 }, "the storage kept a value the backer replaced")
    }
}

/// "No user code runs under a package lock": a store's `observeChanges` is user code, and it may open a storage of
/// its own store (to keep its cursor, say).
///
/// `StoreFeeds.use` puts a placeholder feed in its table and calls `observeChanges` with the placeholder's
/// `started` group entered; every other `use` of that identity waits on the group. A storage of the same store
/// opened from inside `observeChanges` (on the thread that is starting the feed) waits for a group that only its own
/// thread can leave: the program hangs in the first storage's initializer.
@Suite(.capturingOutput) struct StoreFeedStartTests {
    @Test func aStorageOfTheSameStoreOpenedInsideObserveChangesDoesNotHang() {
        let store = HostileStore()
        let keeper = Keeper()
        store.onObserve = { store in
            // The store keeps the cursor of its feed in a storage of its own.
            keeper.keep(WLStorage(key: "cursor", defaultValue: 0, flushInterval: nil, store: store))
        }
        let keeperOfFirst = Keeper()
        let finished = finishes(within: 60) {
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
@Suite(.capturingOutput) struct StoreFeedIdentityTests {
    @Test func theFeedEndsWithTheLastStorageWhenTheIdentityChangedMeanwhile() {
        let store = HostileStore(identityFollowsGeneration: true)
        do {
            let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
            #expect(store.feedCount == 1)
            store.newGeneration()  // the store reconnected
            storage.wrappedValue = 1
        }
        #expect(store.stored("n") == "1")
        #expect(eventually(timeout: 30) { store.feedCount == 0 }, "the feed outlives every storage of the store")
    }

    @Test func aChangeToEveryKeyReachesTheStorageWhenTheIdentityChangedMeanwhile() {
        let store = HostileStore(identityFollowsGeneration: true)
        store.writeFromOutside("n", json: "1")
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
        #expect(storage.wrappedValue == 1)
        store.newGeneration()  // the store reconnected; its feed, started before, goes on
        store.state.withLock { $0.values["n"] = Data("4".utf8) }
        store.report(.everything)  // events may have been lost while reconnecting
        #expect(eventually(timeout: 30) { storage.wrappedValue == 4 }, "the feed's report reached no cell")
    }
}

/// "A default is saved only where nothing is stored", and a released storage's cell is kept only "until the work is
/// done".
///
/// `WLStorageDefaultBacker.readStored` counts empty bytes as nothing stored, so the cell starts `.defaultUnsaved`; the store's
/// `create` rightly refuses (something is stored), the read after it finds "nothing" again, and
/// `StoreMedium.entryExists` is always `false`, so `StorageCell.perform(.createDefault)` returns `.read(.absent)`:
/// the save failed, to be retried. It never succeeds. The cell tries again forever with the backoff, and once its
/// last storage is released it is orphaned and kept by the registry for good, with the store's feed.
@Suite(.capturingOutput) struct StoreFeedEmptyBytesTests {
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
        #expect(eventually(timeout: 30) { cell == nil }, "the released cell is kept, retrying its default for good")
        #expect(eventually(timeout: 30) { store.feedCount == 0 }, "the store's feed outlives every storage")
    }
}

/// A feed called synchronously from inside `observeChanges`, `read`, `write` and a batch: no lock is held there, so
/// nothing is recursive, and every change still lands.
@Suite(.capturingOutput) struct StoreReentrantFeedTests {
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
        let finished = finishes(within: 60) {
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

/// The feed racing the storage's creation, and the storage's release.
@Suite(.capturingOutput) struct StoreFeedRaceTests {
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
            let observation = WLStorageSubscription { stops.add(1, ordering: .relaxed) }
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
        let storms = [
            startThread {
                while !stop.load(ordering: .sequentiallyConsistent) { store.report(.everything) }
            },
            startThread {
                while !stop.load(ordering: .sequentiallyConsistent) {
                    flushAllStores([store])
                    usleep(1_000)
                }
            },
        ]
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
        #expect(storms.allSatisfy { $0.wait(timeout: .now() + 60) == .success })
        #expect(finished)
        for thread in 0..<4 { #expect(eventually { store.stored("k\(thread)") == "99" }) }
        #expect(eventually { store.feedCount == 0 })
    }
}

/// "Reporting a change that was not one ... costs one read of the key" — and no more than that, however fast the
/// feed reports.
///
/// When every report queued one check per cell on the concurrent queue of checks, nothing coalesced a check already
/// queued for a cell. A feed that reports faster
/// than the checks run (a busy `LISTEN` channel, `.everything` after each reconnection attempt of a flapping
/// connection) grows the queue without bound: measured here, 200,000 reports of `.everything` to 20 storages queued
/// 4,000,000 checks, grew the process by 570 MB, and took more than 80 s of both cores to drain, long after the feed
/// went quiet. A check that has not started yet reads the key as it is when it runs, so a second one queued behind it
/// finds nothing new.
@Suite(.capturingOutput) struct StoreFeedReportStormTests {
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

/// The changes a feed reports while a round of checks runs are handed to their storages in the order they were
/// reported: a program that writes one key and then another is seen to do so, as a replica that waits for the second
/// key (a marker) to know the first is in relies on.
@Suite(.capturingOutput) struct StoreFeedOrderTests {
    @Test func keysReportedDuringARoundAreAdoptedInTheOrderReported() throws {
        let store = MemoryStore()
        let gate = WLStorage(key: "gate", defaultValue: 0, flushInterval: nil, store: store)
        let keys = (0..<20).map { "key\($0)" }
        let storages = keys.map { WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store) }
        // Their defaults saved first: a check asked for while a cell's job is in flight is left to that job.
        gate.flush()
        storages.forEach { $0.flush() }
        let adopted = Lock<[String]>([])
        let subscriptions = zip(keys, storages).map { key, storage in
            storage.onChange(queue: nil) { _ in adopted.withLock { $0.append(key) } }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        // The round that adopts the gate's change is held in the gate's handler while the keys are reported.
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let gateSubscription = gate.onChange(queue: nil) { _ in
            held.signal()
            _ = release.wait(timeout: .now() + 30)
        }
        defer { gateSubscription.cancel() }
        store.writeFromOutside("gate", json: "1")
        try #require(held.wait(timeout: .now() + 30) == .success, "the gate's change was never adopted")
        for key in keys { store.writeFromOutside(key, json: "1") }
        release.signal()
        #expect(eventually { adopted.withLock { $0.count } == keys.count })
        #expect(adopted.withLock { $0 } == keys)
    }
}
