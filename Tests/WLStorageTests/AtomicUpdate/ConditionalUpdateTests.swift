// update() over a store that writes on condition: each update is applied exactly once, on the latest value, and no
// pending rewrite replaces another replica's update.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageCrypto

@testable import WLStorage

@Suite(.capturingOutput)
struct ConditionalUpdateTests: EncryptedDirectorySuite, StoredFileSuite {
    let key = try! WLStorageEncryptionKey.random()

    /// "Empty bytes stand for nothing stored, as in any store": an update of a key that holds empty bytes in an
    /// encrypted store over a store that writes on condition must end (it does over the plain store).
    @Test func anUpdateOfAKeyHoldingEmptyBytesInAnEncryptedConditionalStoreEnds() throws {
        let memory = MemoryStore()
        let encrypted = memory.encrypted(with: key)
        try encrypted.write(key: "n", data: json("5"))
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: encrypted)
        #expect(storage.wrappedValue == 5)
        // Another replica empties the key (no feed event: the update reads the store itself).
        memory.contents.state.withLock { $0.values["n"] = Data() }
        let readsBefore = memory.reads
        let done = Atomic<Bool>(false)
        let thread = Thread {
            storage.update { $0 += 1 }
            done.store(true, ordering: .releasing)
        }
        thread.start()
        // Counted, not timed: each try of the conditional write reads the key first, so an update that tries without
        // end soon reads it far more often than one that ends ever does, however slow the machine.
        _ = eventually(timeout: 60) { done.load(ordering: .acquiring) || memory.reads - readsBefore > 1_000 }
        let ended = done.load(ordering: .acquiring)
        let reads = memory.reads - readsBefore
        #expect(ended, "update() read the key \(reads) times without ending: it retries its conditional write forever")
        if !ended {
            // Unblock the spinning update: a sealed empty value compares equal to the empty bytes it expects.
            let emptySealed = try SealedBox.seal(Data(), key: key.bytes, associatedKey: "n")
            memory.contents.state.withLock { $0.values["n"] = emptySealed }
            #expect(eventually(timeout: 30) { done.load(ordering: .acquiring) })
        }
        #expect(storage.wrappedValue == 1)
    }

    /// "The storage's errors for an encrypted store never quote what was stored": an update that reads another
    /// version's value in an encrypted store reports it, and the report says only that it does not decode.
    @Test func anUpdateThatReadsAnotherVersionsSecretDoesNotQuoteIt() throws {
        enum Level: String, Codable, Sendable { case low, high }
        let memory = MemoryStore()
        let encrypted = memory.encrypted(with: key)
        let storage = WLStorage<Level>(key: "level", defaultValue: .low, flushInterval: nil, store: encrypted)
        // Another version of the program, whose type has a case this one lacks, stores its value meanwhile.
        try encrypted.write(key: "level", data: json("\"secret-level-7\""))
        storage.update { $0 = .high }
        let error = try #require(storage.lastError)
        #expect(error.code == .storedByAnotherVersion)
        #expect(error.message.hasPrefix("the update found bytes"), "\(error)")
        #expect(!String(describing: error).contains("secret-level-7"), "\(error)")
    }

    /// The same over the plain memory store: the update ends, and stores 1.
    @Test func anUpdateOfAKeyHoldingEmptyBytesInAPlainConditionalStoreEnds() throws {
        let memory = MemoryStore()
        memory.contents.state.withLock { $0.values["n"] = json("5") }
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: memory)
        #expect(storage.wrappedValue == 5)
        memory.contents.state.withLock { $0.values["n"] = Data() }
        storage.update { $0 += 1 }
        #expect(storage.wrappedValue == 1)
        #expect(memory.stored("n") == "1")
    }

    /// A throwing closure, a key removed behind the storage (expected nil), and a prefixed conditional base: updates
    /// from two replicas through `memory.prefixed("a.").encrypted(...)` lose nothing, and a throw stores nothing.
    @Test func updatesOfAPrefixedConditionalBaseHoldWithThrowsAndMissingValues() throws {
        struct Refused: Error {}
        let memory = MemoryStore()
        let one = WLStorage(
            key: "n", defaultValue: 0, flushInterval: nil, store: memory.prefixed("a.").encrypted(with: key))
        let two = WLStorage(
            key: "a.n", defaultValue: 0, flushInterval: nil,
            store: MemoryStore(replicaOf: memory).encrypted(with: key))
        one.flush()
        two.flush()
        memory.contents.state.withLock { $0.values["a.n"] = nil }  // removed behind both
        one.update { $0 += 1 }
        #expect(try memory.encrypted(with: key).read(key: "a.n") == json("1"))
        #expect(throws: Refused.self) { try two.update { _ in throw Refused() } }
        #expect(try memory.encrypted(with: key).read(key: "a.n") == json("1"))
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            for _ in 0..<50 { (index % 2 == 0 ? one : two).update { $0 += 1 } }
        }
        #expect(try memory.encrypted(with: key).read(key: "a.n") == json("201"))
        #expect(memory.contents.state.withLock { $0.values["n"] } == nil)
    }

    /// The notification of another program's change reaches the cell late, while an update's closure runs: the cell
    /// adopts that (older) value, the update's conditional write succeeds over it, and the cell never takes the
    /// update's result, which it has recorded as its own write. The storage reads a value the store no longer holds,
    /// for good.
    @Test func anUpdateOfAConditionalStoreIsSeenByItsStorageWhenALateNotificationIsAdoptedDuringTheClosure() {
        let store = MemoryStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 1
        storage.flush()
        #expect(store.stored("counter") == "1")
        // Another program stores 5; its notification has not arrived yet.
        store.contents.state.withLock { $0.values["counter"] = Data("5".utf8) }
        let runs = Lock(0)
        storage.update { value in
            let run = runs.withLock { runs -> Int in
                runs += 1
                return runs
            }
            if run == 1 {
                // The notification arrives now, and the cell adopts 5.
                store.report(.key("counter"))
                _ = eventually(timeout: 30) { storage.wrappedValue == 5 }
            }
            value += 1
        }
        #expect(store.stored("counter") == "6")
        // The store's feed would report the update's own write too (the PostgreSQL store does).
        store.report(.key("counter"))
        #expect(eventually(timeout: 30) { storage.wrappedValue == 6 })
        #expect(storage.wrappedValue == Int(store.stored("counter") ?? "") ?? -1)
    }

    /// A set lands after the update's first flush, before its closure reads the store: the update starts from what the
    /// store held, its conditional write succeeds, and the set, pending, is written after it. The set was made before
    /// the update began (and the documentation says a pending change is written first so that the update starts
    /// from it), yet the update's change is lost.
    @Test func anUpdateOfAConditionalStoreStartsFromASetMadeBeforeItBegan() {
        let store = InterceptedStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.flush()
        storage.wrappedValue = 3
        // The update's flush writes 3; as that write ends, another thread sets 7 (and returns) before the update
        // goes on.
        store.afterNextWrite {
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                storage.wrappedValue = 7
                done.signal()
            }
            done.wait()
        }
        let startedFrom = storage.update { value -> Int in
            defer { value += 1 }
            return value
        }
        storage.flush()
        #expect(startedFrom == 7)
        #expect(storage.wrappedValue == 8)
        #expect(store.base.stored("counter") == "8")
    }

    /// An update's commit tells Observation's trackers (willSet) while its thread still counts as updating: a set
    /// from the tracker's onChange, which a set's commit allows, is refused and reported as a set "from inside its own
    /// update", though the closure has returned.
    @Test func aSetFromAnObservationHandlerDuringAnUpdatesCommitIsNotReportedAsReentrant() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("value", in: directory, default: 0, flushInterval: nil)
            // The handler sets the storage once (Observation tells a tracker again of a change made from its own
            // handler).
            func track() {
                let once = Lock(false)
                withObservationTracking {
                    _ = storage.wrappedValue
                } onChange: {
                    let first = once.withLock { fired -> Bool in
                        defer { fired = true }
                        return !fired
                    }
                    guard first else { return }
                    storage.wrappedValue = 100
                }
            }
            // Around a set: no error.
            track()
            storage.wrappedValue = 1
            #expect(storage.lastError == nil)
            // Around an update's commit, after its closure returned.
            track()
            storage.update { $0 += 1 }
            #expect(storage.lastError == nil)
        }
    }

    /// A set of a storage from inside its own update is refused and reported, so that the update does not run again
    /// without end. The thread records 15 nested updates only: inside the 16th (of 16 storages, each updated from the
    /// closure of the one before), a set of that storage from its own closure is made, the closure runs again, and
    /// again (here stopped after 50 runs).
    @Test func aSetFromInsideAnUpdateNestedSixteenDeepIsRefused() throws {
        try withTemporaryDirectory { directory in
            let storages = (0..<16).map { index in
                fileStorage("nested\(index)", in: directory, default: 0, flushInterval: nil)
            }
            let runs = Lock(0)
            func nest(_ index: Int) {
                storages[index].update { value in
                    if index + 1 < storages.count {
                        nest(index + 1)
                    } else {
                        let run = runs.withLock { runs -> Int in
                            runs += 1
                            return runs
                        }
                        if run < 50 { storages[index].wrappedValue = 100 }
                    }
                    value += 1
                }
            }
            nest(0)
            #expect(runs.withLock { $0 } == 1)
            #expect(storages[15].lastError?.code == .reentrantCall)
        }
    }

    /// A value read in an earlier shape is to be rewritten in the current one, and that rewrite gives way to another
    /// program's change. An update of a conditional store "writes this process's pending change first": it writes the
    /// rewrite unconditionally, over what another replica stored meanwhile (its notification still on its way), and
    /// then runs its closure on the rewrite's value. The other replica's value is lost, though the store could have
    /// told (the rewrite is no change of this process, and the update's read would have found the other value).
    @Test func anUpdateOfAConditionalStoreDoesNotWriteAPendingRewriteOverAnotherReplicasValue() {
        let store = MemoryStore()
        store.writeFromOutside("window", json: #"{"title":"main"}"#)
        let storage = WLStorage(
            key: "window", defaultValue: PanedWindow(name: "new", pane: WindowPane()), flushInterval: nil, store: store,
            migrations: panedWindowMigrations)
        #expect(storage.wrappedValue.name == "main")
        #expect(storage.hasPendingChanges)  // the rewrite in the current shape
        // Another replica, already of the new version, stores its value; its notification has not arrived yet.
        let theirs = #"{"name":"theirs","pane":{"height":2,"width":1}}"#
        store.contents.state.withLock { $0.values["window"] = Data(theirs.utf8) }
        storage.update { $0.pane.width += 10 }
        store.report(.key("window"))
        #expect(store.stored("window")?.contains("theirs") == true, "stored: \(store.stored("window") ?? "nil")")
        let expected = PanedWindow(name: "theirs", pane: WindowPane(width: 11, height: 2))
        #expect(eventually(timeout: 30) { storage.wrappedValue == expected })
    }

    /// The conditional write stores the update's result, but its answer is lost (the PostgreSQL store's connection
    /// breaks, or its timeout passes, after the server committed): it throws, and the update is made again in the
    /// process, "as a set", by running the closure once more on the cell's value. Meanwhile the store's feed reported
    /// the write (the PostgreSQL listener takes a notification of the lost connection's server process for another
    /// program's), and the cell adopted the update's own result: the closure runs on it, and the increment counts
    /// twice.
    /// Another program stores 5, whose news comes late; an update reads 5 and stores 15. The check the news starts
    /// reads 5 while the update's closure runs, before the update writes, and its result comes after the update took
    /// 15: it must not put 5 back over the value the store holds.
    @Test func aCheckThatReadBeforeAnUpdatesWriteDoesNotAdoptWhatItReadOverTheUpdate() {
        let store = InterceptedStore(feed: .announced)
        let replica = MemoryStore(replicaOf: store.base)
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 1
        storage.flush()
        _ = try? replica.write(key: "n", data: Data("5".utf8))
        let released = DispatchSemaphore(value: 0)
        let result = storage.update { value -> Int in
            // The news arrives now; the check it starts reads 5 and is held there until the update is done.
            let reached = store.holdNextRead(afterReadingUntil: released)
            store.announce(.key("n"))
            #expect(reached.wait(timeout: .now() + 60) == .success)
            value += 10
            return value
        }
        #expect(result == 15)
        released.signal()
        storage.flush()  // waits for the check in flight
        #expect(storage.wrappedValue == 15)
        #expect(store.base.stored("n") == "15")
    }

    @Test func anUpdateWhoseConditionalWriteStoredButThrewIsNotAppliedTwice() {
        let store = InterceptedStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 5
        storage.flush()
        store.afterNextConditionalWrite(losingTheOutcome: true) {
            // The write is reported as another program's, and adopted, before the answer is found lost.
            store.base.report(.key("counter"))
            _ = eventually(timeout: 30) { storage.wrappedValue == 6 }
        }
        storage.update { $0 += 1 }
        storage.flush()
        #expect(storage.wrappedValue == 6)
        #expect(store.base.stored("counter") == "6")
    }
}
