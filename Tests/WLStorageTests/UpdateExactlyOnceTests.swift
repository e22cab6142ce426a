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
}
