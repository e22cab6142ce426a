import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// flush(), deinit and concurrent use, on real threads.
@Suite(.capturingOutput) struct FlushTests {
    @Test func flushWaitsForAWriteInFlightThenWritesWhateverIsNewer() {
        let backer = RecordingBacker<Int>(stored: 0, blocking: true)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: 1, backer: backer)
        storage.wrappedValue = 1
        #expect(backer.waitForWriteToStart())  // the leading write of 1 is now in flight, held by the backer
        storage.wrappedValue = 2

        let flushed = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            storage.flush()
            flushed.store(true, ordering: .sequentiallyConsistent)
            done.signal()
        }
        usleep(100_000)
        let returnedEarly = flushed.load(ordering: .sequentiallyConsistent)
        #expect(!returnedEarly, "flush returned while a write was in flight")
        backer.releaseWrite()  // the write of 1 ends
        #expect(backer.waitForWriteToStart())  // flush writes 2
        backer.releaseWrite()
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(backer.writes == [1, 2])
    }

    @Test func concurrentFlushesTakeTurnsAndTheLastValueLands() {
        let backer = OverlapCheckingBacker()
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            storage.wrappedValue = index
            storage.flush()
        }
        storage.flush()
        #expect(backer.maximumOverlap == 1)
        #expect(backer.lastWritten == storage.wrappedValue)
    }

    @Test func concurrentSettersAndGettersSeeWholeValuesAndTheFileEndsWithTheLastOne() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("pairs", in: directory, default: [0, 0])
            DispatchQueue.concurrentPerform(iterations: 8) { thread in
                for step in 0..<2_000 {
                    if step % 2 == 0 {
                        storage.wrappedValue = [thread, step]
                    } else {
                        let pair = storage.wrappedValue
                        precondition(pair.count == 2)
                    }
                }
            }
            storage.flush()
            #expect(stored([Int].self, key: "pairs", in: directory) == storage.wrappedValue)
        }
    }

    @Test func deinitFlushesSoThatAStorageOpenedRightAfterReadsTheValue() throws {
        try withTemporaryDirectory { directory in
            do {
                let storage = fileStorage("name", in: directory, default: "", flushInterval: 3_600)
                storage.wrappedValue = "first"
                storage.wrappedValue = "second"
            }
            let reopened = fileStorage("name", in: directory, default: "")
            #expect(reopened.wrappedValue == "second")
        }
    }

    @Test func deinitWaitsForTheWriteInFlight() {
        let backer = RecordingBacker<Int>(stored: 0, blocking: true)
        let deinitialized = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: 1, backer: backer)
                storage.wrappedValue = 1
                _ = backer.waitForWriteToStart()
                storage.wrappedValue = 2
            }
            deinitialized.signal()
        }
        #expect(deinitialized.wait(timeout: .now() + 0.1) == .timedOut)
        backer.releaseWrite()
        #expect(backer.waitForWriteToStart())
        backer.releaseWrite()
        #expect(deinitialized.wait(timeout: .now() + 60) == .success)
        #expect(backer.writes == [1, 2])
    }

    @Test func aSetIsVisibleOnAnotherThreadAtOnce() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        storage.wrappedValue = 42
        let seen = Atomic<Int>(0)
        Thread.detachNewThread { seen.store(storage.wrappedValue, ordering: .sequentiallyConsistent) }
        let sawIt = eventually { seen.load(ordering: .sequentiallyConsistent) == 42 }
        #expect(sawIt)
    }

    @Test func aSlowBackerNeverBlocksASet() {
        let backer = RecordingBacker<Int>(stored: 0, blocking: true)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: 1, backer: backer)
        storage.wrappedValue = 1
        #expect(backer.waitForWriteToStart())
        for value in 2...1_000 { storage.wrappedValue = value }  // would hang here if a set waited for the disk
        #expect(storage.wrappedValue == 1_000)
        backer.releaseWrite()
        #expect(backer.waitForWriteToStart())
        backer.releaseWrite()
        storage.flush()
        #expect(backer.writes.last == 1_000)
    }
}

/// Records how many writes ever ran at the same time.
final class OverlapCheckingBacker: WLStorageBacker {
    let key = "overlap"
    private let inside = Atomic<Int>(0)
    private let maximum = Atomic<Int>(0)
    private let last = Atomic<Int>(-1)

    func read(defaultValueClosure: () -> Int) -> Int { defaultValueClosure() }

    func write(value: Int) {
        let now = inside.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
        _ = maximum.max(now, ordering: .sequentiallyConsistent)
        usleep(2_000)
        last.store(value, ordering: .sequentiallyConsistent)
        inside.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    var maximumOverlap: Int { maximum.load(ordering: .sequentiallyConsistent) }
    var lastWritten: Int { last.load(ordering: .sequentiallyConsistent) }
}
