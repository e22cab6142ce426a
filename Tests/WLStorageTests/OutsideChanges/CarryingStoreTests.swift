import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

/// A store of a program's own whose feed carries versions and bytes (``CarryingMemoryStore``, written against the
/// public API alone): a storage takes another program's write from the feed, and reads the key only when what the
/// feed carried cannot be trusted to follow on from what it knows.
@Suite(.onTestThreads) struct CarryingStoreTests {
    /// A storage of `store`'s key "k", opened once the store holds 1, and the reads of the key its opening made.
    private func openedStorage(_ store: CarryingMemoryStore) -> (WLStorage<Int>, reads: Int) {
        store.writeFromOutside("k", json: "1")
        let storage = WLStorage(key: "k", defaultValue: 0, store: store)
        return (storage, store.reads(of: "k"))
    }

    @Test func anotherProgramsWritesAreTakenFromTheFeedWithoutAReadOfTheKey() {
        let store = CarryingMemoryStore()
        let (storage, readsAtOpen) = openedStorage(store)
        #expect(storage.wrappedValue == 1)
        for value in 2...5 {
            store.writeFromOutside("k", json: String(value))
            #expect(eventually { storage.wrappedValue == value }, "the storage holds \(storage.wrappedValue)")
        }
        #expect(store.reads(of: "k") == readsAtOpen)
    }

    @Test func aChangeReportedWithoutItsBytesIsRead() {
        let store = CarryingMemoryStore()
        let (storage, readsAtOpen) = openedStorage(store)
        store.writeFromOutside("k", json: "2", carried: false)
        #expect(eventually { storage.wrappedValue == 2 }, "the storage holds \(storage.wrappedValue)")
        #expect(store.reads(of: "k") > readsAtOpen)
    }

    /// A write the feed never reported leaves a gap before the next version carried: its bytes are not taken as they
    /// are, the key is read, and the storage ends with the latest value.
    @Test func aGapInTheVersionsCarriedMakesTheStorageReadTheKey() {
        let store = CarryingMemoryStore()
        let (storage, readsAtOpen) = openedStorage(store)
        store.writeUnreported("k", json: "2")
        store.writeFromOutside("k", json: "3")
        #expect(eventually { storage.wrappedValue == 3 }, "the storage holds \(storage.wrappedValue)")
        #expect(store.reads(of: "k") > readsAtOpen)
    }

    /// The storage's own write comes back through the feed, carried: the storage keeps its value, and takes the next
    /// change of another program.
    @Test func itsOwnWriteHeardBackChangesNothingAndTheNextChangeIsTaken() {
        let store = CarryingMemoryStore()
        let (storage, _) = openedStorage(store)
        storage.wrappedValue = 10
        storage.flush()
        #expect((try? store.read(key: "k")) == Data("10".utf8))
        #expect(storage.wrappedValue == 10)
        store.writeFromOutside("k", json: "11")
        #expect(eventually { storage.wrappedValue == 11 }, "the storage holds \(storage.wrappedValue)")
    }

    /// A store that says the version of each write: the storage knows its own writes when the feed reports them, and
    /// reads its key for none of them; the next change of another program is taken as carried.
    @Test func itsOwnWritesWhoseVersionsTheStoreSaysAreNotReadBack() {
        let store = CarryingMemoryStore()
        let (storage, readsAtOpen) = openedStorage(store)
        for value in 10...14 {
            storage.wrappedValue = value
            storage.flush()
        }
        store.writeFromOutside("k", json: "20")
        #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
        #expect(store.reads(of: "k", finding: 2...6) == 0)
        #expect(store.reads(of: "k") >= readsAtOpen)
    }

    /// An operator removes the key without a word from the feed, and the storage's write makes it anew, at version 1.
    /// Before the write returns, the operator removes it again and another program makes it anew, at version 1 too.
    /// The feed reports both writes at the same version: the second is not the storage's own, and it ends holding it.
    @Test func anotherProgramsWriteAtTheVersionOfItsOwnWriteIsTaken() {
        let store = CarryingMemoryStore()
        let (storage, _) = openedStorage(store)
        store.removeUnreported("k")
        store.afterNextWrite(of: "k") {
            store.removeUnreported("k")
            store.writeFromOutside("k", json: "20")
        }
        storage.wrappedValue = 10
        storage.flush()
        #expect((try? store.readWithVersion(key: "k"))?.version == 1)
        #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
    }

    /// Another program writes the key after the storage's write is stored, before the write returns: the storage takes
    /// it from the feed, after its own, without a read of the key.
    @Test func anotherProgramsWriteRightAfterItsOwnIsTakenFromTheFeed() {
        let store = CarryingMemoryStore()
        let (storage, readsAtOpen) = openedStorage(store)
        store.afterNextWrite(of: "k") { store.writeFromOutside("k", json: "20") }
        storage.wrappedValue = 10
        storage.flush()
        #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
        #expect(store.reads(of: "k") == readsAtOpen)
    }

    /// A prefixed store over a carrying one: the storage's writes go to the prefixed key, each heard back at the
    /// version it made, and another program's change of the prefixed key is taken from the feed.
    @Test func itsOwnWritesThroughAPrefixedStoreAreKnownAndAnothersChangeIsTaken() {
        let store = CarryingMemoryStore()
        store.writeFromOutside("p.k", json: "1")
        let storage = WLStorage(key: "k", defaultValue: 0, store: store.prefixed("p."))
        #expect(storage.wrappedValue == 1)
        for value in 10...12 {
            storage.wrappedValue = value
            storage.flush()
        }
        #expect((try? store.readWithVersion(key: "p.k"))?.version == 4)
        store.writeFromOutside("p.k", json: "20")
        #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
        #expect((try? store.keys()) == ["p.k"])
    }

    /// An encrypted store over a carrying one: the storage's writes go through the encrypted store, sealed (the carrying
    /// store's write that says its version takes plain bytes only), and another program's change, sealed with the same
    /// key, is taken.
    @Test func anEncryptedStoreOverACarryingOneSealsItsOwnWritesAndTakesAnothers() throws {
        let store = CarryingMemoryStore()
        let key = try WLStorageEncryptionKey.random()
        let storage = WLStorage(key: "k", defaultValue: 0, store: store.encrypted(with: key))
        storage.wrappedValue = 10
        storage.flush()
        let sealed = try #require(try store.read(key: "k"))
        #expect(sealed != Data("10".utf8))
        #expect(try store.encrypted(with: key).read(key: "k") == Data("10".utf8))
        try store.encrypted(with: key).write(key: "k", data: Data("20".utf8))
        #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
    }

    /// Two writes of the storage, each ending with a check left to run (its report heard while it wrote), and the
    /// checks run late, together: the first finds both writes heard back, its own; the second finds nothing more
    /// reported, and nothing reads the key.
    @Test func checksLeftByItsOwnWritesAndRunLateReadNothing() {
        let store = CarryingMemoryStore()
        store.writeFromOutside("k", json: "1")
        let scheduler = ManualScheduler()
        let medium = StoreMedium(store: store, storedKey: "k", capabilities: Stores.capabilities(of: store))
        let storage = WLStorage<Int>(
            defaultValueClosure: { 0 }, flushInterval: nil,
            backer: WLStorageDefaultBacker<Int>(key: "k", medium: medium),
            scheduler: scheduler)
        #expect(storage.wrappedValue == 1)
        let readsAtOpen = store.reads(of: "k")
        storage.wrappedValue = 10
        storage.flush()
        storage.wrappedValue = 11
        storage.flush()
        #expect(scheduler.pendingJobs == 2)
        scheduler.advance()
        #expect(store.reads(of: "k") == readsAtOpen)
        store.writeFromOutside("k", json: "20")
        #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
    }

    /// A store that does not say the version of a write: the storage reads its key once the feed reports it, and
    /// holds what it wrote, then another program's change.
    @Test func itsOwnWritesWhoseVersionsAreNotSaidAreReadBack() {
        let store = CarryingMemoryStore(saysWrittenVersions: false)
        let (storage, readsAtOpen) = openedStorage(store)
        storage.wrappedValue = 10
        storage.flush()
        store.writeFromOutside("k", json: "20")
        #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
        #expect(store.reads(of: "k") > readsAtOpen)
    }

    /// While a storage reads its key, another program writes it, an operator removes it without a word from the feed,
    /// and a program makes it anew at version 1. The feed reports both writes after the read that missed them; the
    /// first follows on from the version read, but the last is the key's newest write: the storage ends holding it.
    @Test func aKeyMadeAnewBehindTheFeedsBackWhileTheStorageReadsEndsHeldAtItsNewestWrite() throws {
        let store = CarryingMemoryStore()
        let (storage, _) = openedStorage(store)
        // A write the feed never reported: the next one carried leaves a gap, and the storage reads the key.
        store.writeUnreported("k", json: "2")
        let held = store.holdNextRead(of: "k")
        defer { held.release() }
        let reported = DispatchSemaphore(value: 0)
        // The feed reports a write on the writer's thread, where the storage's check of a carried change runs.
        let writer = Thread {
            store.writeFromOutside("k", json: "3")
            reported.signal()
        }
        writer.start()
        try #require(held.waitUntilReached(), "the storage did not read its key")
        store.writeFromOutside("k", json: "4")
        store.removeUnreported("k")
        store.writeFromOutside("k", json: "10")
        held.release()
        try #require(reported.wait(timeout: .now() + 60) == .success, "the writer's report did not return")
        #expect((try store.read(key: "k")) == Data("10".utf8))
        #expect(eventually { storage.wrappedValue == 10 }, "the storage holds \(storage.wrappedValue)")
    }

    /// Storages of the key opened and released over and over while another program writes it, with one storage kept
    /// open throughout or none (the feed then starts and stops with each): a carried change that reaches a storage
    /// being released does no harm, and every storage open after the last write ends holding it.
    @Test(arguments: [true, false])
    func storagesReleasedWhileChangesAreCarriedLeaveTheOthersHoldingTheLastWrite(keepingOneOpen: Bool) throws {
        let store = CarryingMemoryStore()
        store.writeFromOutside("k", json: "0")
        let steady = keepingOneOpen ? WLStorage(key: "k", defaultValue: -1, store: store) : nil
        let last = 20_000
        let written = DispatchSemaphore(value: 0)
        let writer = Thread {
            for value in 1...last { store.writeFromOutside("k", json: String(value)) }
            written.signal()
        }
        writer.start()
        var opened = 0
        repeat {
            let storage = WLStorage(key: "k", defaultValue: -1, store: store)
            #expect(storage.wrappedValue >= 0)
            opened += 1
        } while written.wait(timeout: .now()) == .timedOut
        let after = WLStorage(key: "k", defaultValue: -1, store: store)
        #expect(eventually { after.wrappedValue == last }, "the storage opened last holds \(after.wrappedValue)")
        if let steady {
            #expect(eventually { steady.wrappedValue == last }, "the storage kept open holds \(steady.wrappedValue)")
        }
        #expect(opened > 0)
    }
}
