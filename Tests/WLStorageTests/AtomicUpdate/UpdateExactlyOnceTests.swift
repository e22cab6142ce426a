import Foundation
import Testing

@testable import WLStorage

/// An update of a value in a store shared by several replicas counts once, even when the answer to its write is lost
/// and another replica writes meanwhile: a counter's increments add up.
@Suite(.capturingOutput)
struct UpdateExactlyOnceTests {
    @Test(arguments: [VersionedMemoryStore.Loss.beforeTheWrite, .afterTheWrite])
    func anIncrementWhoseAnswerIsLostCountsOnceWhileAnotherReplicaIncrements(loss: VersionedMemoryStore.Loss) {
        let store = VersionedMemoryStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 5
        storage.flush()
        // Another replica's increment from 5 writes the very bytes this one's would: 6.
        store.loseNextAnswer(loss) { store.incrementFromOutside("counter") }
        storage.update { $0 += 1 }
        storage.flush()
        #expect(store.stored("counter") == "7")
        #expect(eventually { storage.wrappedValue == 7 }, "the storage holds \(storage.wrappedValue)")
    }

    @Test func anUpdateWhoseOutcomeCannotBeToldIsReportedAndNotMadeAgain() {
        // A row that keeps two tags: three writes after this update's push its tag out.
        let store = VersionedMemoryStore(capacity: 2)
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 5
        storage.flush()
        store.loseNextAnswer(.afterTheWrite) {
            for _ in 0..<3 { store.incrementFromOutside("counter") }
        }
        storage.update { $0 += 1 }
        storage.flush()
        // Neither made twice nor written over the others' increments as a set.
        #expect(store.stored("counter") == "9")
        #expect(eventually { storage.wrappedValue == 9 }, "the storage holds \(storage.wrappedValue)")
        let reported = ReportedErrors.errors { $0.message.contains(store.identity) }
        #expect(reported.count == 1, "\(reported)")
        #expect(reported.first?.code == .writeFailed)
        #expect(reported.first?.message.contains("is not known") == true, "\(reported)")
    }

    /// A store that compares bytes: the write of an update of a key that holds nothing (another program removed it)
    /// fails before it stores; the
    /// key, read back, still holds nothing, so the update is tried again and made. It was reported as "not known" and
    /// not made, as if the key read back had been unreadable.
    @Test func anUpdateOfAnEmptyKeyWhoseWriteFailsBeforeStoringIsMade() {
        let store = MemoryStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.flush()
        store.removeFromOutside("counter")
        store.failConditionalWrites(1)
        storage.update { $0 += 1 }
        storage.flush()
        #expect(store.stored("counter") == "1")
        #expect(eventually { storage.wrappedValue == 1 }, "the storage holds \(storage.wrappedValue)")
        let reported = ReportedErrors.errors { $0.message.contains(store.identity) }
        #expect(!reported.contains { $0.message.contains("is not known") }, "\(reported)")
    }

    @Test func manyIncrementsWhoseAnswersAreLostWhileAnotherReplicaIncrementsAddUp() {
        let store = VersionedMemoryStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        for index in 0..<100 {
            store.loseNextAnswer(index % 2 == 0 ? .beforeTheWrite : .afterTheWrite) {
                store.incrementFromOutside("counter")
            }
            storage.update { $0 += 1 }
        }
        storage.flush()
        #expect(store.stored("counter") == "200")
    }

    /// The row after a write whose answer was lost: its version, whether it keeps the write's tag, how many tags it
    /// keeps of 4; the version the write expected; whether the write committed (`nil`: cannot be told).
    @Test(arguments: [
        (WLStorageTagTrace(version: 9, tagFound: true, tagsKept: 4, capacity: 4), Int64?(5), Bool?(true)),
        // Fewer tags than it can keep: none was pushed out.
        (WLStorageTagTrace(version: 20, tagFound: false, tagsKept: 3, capacity: 4), 5, false),
        // Written at 6 it would be among the tags of versions 6 to 9.
        (WLStorageTagTrace(version: 9, tagFound: false, tagsKept: 4, capacity: 4), 5, false),
        (WLStorageTagTrace(version: 10, tagFound: false, tagsKept: 4, capacity: 4), 5, nil),
        // A row the write would have made, at version 1.
        (WLStorageTagTrace(version: 4, tagFound: false, tagsKept: 4, capacity: 4), nil, false),
        (WLStorageTagTrace(version: 5, tagFound: false, tagsKept: 4, capacity: 4), nil, nil),
    ])
    func theRowTellsWhetherAWriteCommittedUntilItsTagCanHaveBeenPushedOut(
        trace: WLStorageTagTrace, expected: Int64?, committed: Bool?
    ) {
        #expect(trace.committed(ifVersion: expected) == committed)
    }
}
