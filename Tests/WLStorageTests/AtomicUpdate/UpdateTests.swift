import Dispatch
import Foundation
import Observation
import Testing

@testable import WLStorage

@Suite(.capturingOutput)
struct UpdateTests {
    @Test func eightThreadsIncrementingOneCounterAHundredThousandTimesLoseNothing() throws {
        try withTemporaryDirectory { directory in
            let counter = fileStorage("counter", in: directory, default: 0, flushInterval: 1)
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                for _ in 0..<12_500 { counter.update { $0 += 1 } }
            }
            #expect(counter.wrappedValue == 100_000)
            counter.flush()
            #expect(stored(Int.self, key: "counter", in: directory) == 100_000)
        }
    }

    @Test func updatesOfTwoStoragesOfOneKeyShareTheValue() throws {
        try withTemporaryDirectory { directory in
            let first = fileStorage("counter", in: directory, default: 0, flushInterval: nil)
            let second = fileStorage("counter", in: directory, default: 0, flushInterval: nil)
            DispatchQueue.concurrentPerform(iterations: 4) { index in
                let storage = index % 2 == 0 ? first : second
                for _ in 0..<2_000 { storage.update { $0 += 1 } }
            }
            #expect(first.wrappedValue == 8_000)
            #expect(second.wrappedValue == 8_000)
        }
    }

    @Test func aSetMadeWhileTheClosureRunsIsNotOverwrittenTheClosureRunsAgainOnIt() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("value", in: directory, default: 1, flushInterval: nil)
            let runs = Lock<[Int]>([])
            let result = storage.update { value -> String in
                runs.withLock { $0.append(value) }
                if runs.withLock({ $0.count }) == 1 {
                    // Another thread sets the storage while this closure runs.
                    let done = DispatchSemaphore(value: 0)
                    Thread.detachNewThread {
                        storage.wrappedValue = 100
                        done.signal()
                    }
                    done.wait()
                }
                value += 1
                return "ran on \(value - 1)"
            }
            #expect(runs.withLock { $0 } == [1, 100])
            #expect(result == "ran on 100")
            #expect(storage.wrappedValue == 101)
        }
    }

    @Test func aThrowingClosureLeavesTheValueAsItWasAndItsErrorComesOut() throws {
        struct Refused: Error {}
        try withTemporaryDirectory { directory in
            let storage = fileStorage("value", in: directory, default: 5, flushInterval: nil)
            #expect(throws: Refused.self) {
                try storage.update { value in
                    value = 99
                    throw Refused()
                }
            }
            #expect(storage.wrappedValue == 5)
            #expect(!storage.hasPendingChanges)
            // The storage is not left marked as updating: a set from this thread works.
            storage.wrappedValue = 6
            #expect(storage.wrappedValue == 6)
        }
    }

    @Test func aSetOrAnUpdateOfTheSameStorageInsideTheClosureIsRefusedAndReportedNotAHang() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("value", in: directory, default: 0, flushInterval: nil)
            let twin = fileStorage("value", in: directory, default: 0, flushInterval: nil)
            storage.update { value in
                storage.wrappedValue = 50
                value += 1
            }
            #expect(storage.wrappedValue == 1)
            #expect(storage.lastError?.code == .reentrantCall)
            #expect(
                storage.lastError?.message.contains("set was called on this storage from inside its own update") == true
            )
            let inner = storage.update { value -> Int in
                // Another storage of the same key is the same value.
                let nested = twin.update { inner -> Int in
                    inner += 10
                    return inner
                }
                value += 1
                return nested
            }
            #expect(inner == 11)  // the nested closure ran on a copy of 1 that was not stored
            #expect(storage.wrappedValue == 2)
            #expect(storage.lastError?.message.contains("update was called on this storage") == true)
        }
    }

    @Test func aRefusalReportedWhileAWriteIsInFlightIsNotClearedByThatWrite() {
        let backer = RecordingBacker<Int>(stored: 0, blocking: true)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: 1, backer: backer)
        storage.wrappedValue = 1
        #expect(backer.waitForWriteToStart())  // the write of 1 is in flight, held by the backer
        storage.update { value in
            storage.wrappedValue = 50
            value += 1
        }
        #expect(storage.lastError?.code == .reentrantCall)
        // The write of 1 succeeds: it says nothing of the misuse reported after it began.
        backer.releaseWrite()
        #expect(backer.waitForWriteToStart())  // the write of 2 follows, once the write of 1 has ended
        #expect(storage.lastError?.code == .reentrantCall)
        // A write that began after it succeeds: the last error is cleared, as a successful write clears it.
        backer.releaseWrite()
        storage.flush()
        #expect(backer.writes == [1, 2])
        #expect(storage.lastError == nil)
    }

    @Test func aDefaultSavedAfterARefusalDoesNotClearIt() throws {
        try withTemporaryDirectory { directory in
            // The save of the default waits for the manual clock: it runs after the refusal is reported.
            let scheduler = ManualScheduler()
            let storage = manualStorage("value", in: directory, default: 0, scheduler: scheduler)
            storage.update { value in
                storage.wrappedValue = 50
                value += 1
            }
            #expect(storage.lastError?.code == .reentrantCall)
            scheduler.advance()
            let file = directory.appendingPathComponent("value")
            #expect(eventually { FileManager.default.fileExists(atPath: file.path) })
            #expect((try? String(contentsOf: file, encoding: .utf8)) == "0")  // the default, not the update's change
            #expect(storage.lastError?.code == .reentrantCall)
            // The update's change, made after the refusal, is written: that clears it.
            scheduler.advance(by: .seconds(10))
            storage.flush()
            #expect(storage.lastError == nil)
        }
    }

    @Test func theClosureMayReadAndFlushItsStorageAndChangeAnother() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("value", in: directory, default: 1, flushInterval: nil)
            let other = fileStorage("other", in: directory, default: 0, flushInterval: nil)
            storage.wrappedValue = 2
            storage.update { value in
                other.wrappedValue = storage.wrappedValue
                storage.flush()
                other.update { $0 += 1 }
                value += 1
            }
            #expect(storage.wrappedValue == 3)
            #expect(other.wrappedValue == 3)
            #expect(stored(Int.self, key: "value", in: directory) == 2)
            #expect(storage.lastError == nil)
        }
    }

    @Test func anUpdateIsObservedAndWrittenOnceLikeASet() async throws {
        let backer = RecordingBacker<Int>(stored: 10)
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(3_600), backer: backer,
            scheduler: ManualScheduler())
        let seen = Lock<[Int]>([])
        let subscription = storage.onChange(queue: DispatchQueue(label: "update-observer")) { value in
            seen.withLock { $0.append(value) }
        }
        let tracked = Flag()
        withObservationTracking {
            _ = storage.wrappedValue
        } onChange: {
            tracked.set()
        }
        storage.update { $0 += 1 }
        #expect(tracked.isSet)
        #expect(await waitUntil { seen.withLock { $0 } == [11] })
        storage.flush()
        #expect(backer.writes == [11])
        subscription.cancel()
    }

    @Test func updatesThroughTwoHandlesOfOneConditionalStoreLoseNothing() throws {
        let first = MemoryStore()
        let second = MemoryStore(replicaOf: first)
        let one = WLStorage(key: "counter", defaultValue: 0, flushInterval: 1, store: first)
        let two = WLStorage(key: "counter", defaultValue: 0, flushInterval: 1, store: second)
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            let storage = index % 2 == 0 ? one : two
            for _ in 0..<1_000 { storage.update { $0 += 1 } }
        }
        // Each handle has a cell of its own, as two programs would; the store holds every increment.
        #expect(first.stored("counter") == "4000")
        #expect(max(one.wrappedValue, two.wrappedValue) == 4_000)
        #expect(!one.hasPendingChanges)
        #expect(!two.hasPendingChanges)
    }

    @Test(arguments: [false, true])
    func updatesThroughTwoEncryptedHandlesOfOneConditionalStoreLoseNothing(prefixed: Bool) throws {
        let key = try WLStorageEncryptionKey.random()
        let memory = MemoryStore()
        let replica = MemoryStore(replicaOf: memory)
        // Through a key prefix too: the encrypted store finds the store that holds the bytes under it.
        let first = prefixed ? memory.prefixed("app.").encrypted(with: key) : memory.encrypted(with: key)
        let second = prefixed ? replica.prefixed("app.").encrypted(with: key) : replica.encrypted(with: key)
        let one = WLStorage(key: "counter", defaultValue: 0, flushInterval: 1, store: first)
        let two = WLStorage(key: "counter", defaultValue: 0, flushInterval: 1, store: second)
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            let storage = index % 2 == 0 ? one : two
            for _ in 0..<500 { storage.update { $0 += 1 } }
        }
        // The encrypted store writes on condition through the store under it: every increment is kept, encrypted.
        #expect(try first.read(key: "counter").map { String(decoding: $0, as: UTF8.self) } == "2000")
        #expect(try second.read(key: "counter").map { String(decoding: $0, as: UTF8.self) } == "2000")
        #expect(max(one.wrappedValue, two.wrappedValue) == 2_000)
        let stored = memory.stored(prefixed ? "app.counter" : "counter")
        #expect(stored != nil && stored?.contains("2000") == false)
    }

    /// An update made in the process and written later as a set would replace what others stored meanwhile: it is
    /// tried again against the store until it can be stored there, on the value the store then holds.
    ///
    /// The store fails the update's writes (as one that cannot be reached); as its fourth begins, another program
    /// stores 10 and the store is back. All of it happens inside the update's own attempts, so that nothing depends on how
    /// fast a loaded machine runs them (a version that waited for the attempts from the test's thread ran out of the
    /// update's 10 s of attempts once, in a CI run beside other builds).
    @Test func anUpdateThatCannotReachItsStoreIsMadeThereOnceItIsBackOnTheValueItThenHolds() throws {
        let store = MemoryStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 4
        storage.flush()
        store.failWrites(true)
        store.afterFailedConditionalWrites(3) {
            store.writeFromOutside("counter", json: "10")
            store.failWrites(false)
        }
        let reads = store.reads
        storage.update { $0 += 1 }
        #expect(store.reads >= reads + 4, "read again for each attempt")
        #expect(store.stored("counter") == "11")
        #expect(storage.wrappedValue == 11)
        #expect(!storage.hasPendingChanges)
    }

    /// While an update waits for its store, the pending set it writes first fails again at each attempt: the failure is
    /// reported once, not once per attempt (a daemon's log would get one line every few tenths of a second).
    @Test func aPendingSetThatFailsAgainWhileAnUpdateWaitsIsReportedOnce() throws {
        struct Counter: Codable, Sendable, Equatable {
            var count = 0
        }
        let store = MemoryStore()
        store.writeFromOutside("counter", json: #"{"count":1}"#)
        let storage = WLStorage(key: "counter", defaultValue: Counter(), flushInterval: nil, store: store)
        try #require(storage.wrappedValue.count == 1)
        storage.wrappedValue.count = 2
        store.failWrites(true)
        store.afterFailedConditionalWrites(5) { store.failWrites(false) }
        storage.update { $0.count += 10 }
        #expect(store.stored("counter") == #"{"count":12}"#)
        let reported = ReportedErrors.errors { $0.message.contains(store.identity) }
        #expect(reported.count == 1, "\(reported.map(\.message))")
    }

    @Test func anUpdateInAStoreStartsFromAPendingLocalChange() throws {
        let store = MemoryStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 7
        #expect(storage.hasPendingChanges)
        storage.update { $0 *= 2 }
        #expect(storage.wrappedValue == 14)
        #expect(store.stored("counter") == "14")
        #expect(!storage.hasPendingChanges)
    }
}

/// A flag set from a handler.
private final class Flag: Sendable {
    private let value = Lock(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
