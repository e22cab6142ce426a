// A write that fails in deinit is retried.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct FailedWriteInDeinitTests {
    @Test func aValueWhoseDeinitWriteFailedIsRetriedLater() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<String>(stored: "old")
        do {
            let storage = WLStorage(
                defaultValueClosure: { "default" }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
            storage.wrappedValue = "new"
            backer.failNextWrites(1)
        }
        // (Another test's flushAll, in this same process, may write it first: that is fine too.)
        #expect(backer.failedWrites == 1, "the deinit write did not fail")
        scheduler.advance(by: .seconds(60))
        #expect(backer.writes == ["new"])
    }

    @Test func aValueWhoseDeinitWriteFailedIsWrittenByFlushAll() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<String>(stored: "old")
        weak var released: StorageCell<String>?
        do {
            let storage = WLStorage(
                defaultValueClosure: { "default" }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
            released = storage.cell
            storage.wrappedValue = "new"
            backer.failNextWrites(1)
        }
        #expect(backer.failedWrites == 1, "the deinit write did not fail")
        // Every live cell is looked at, and this test's flushed: not those the tests beside keep pending.
        let cell = released
        ShutdownHandling.flushEverything(only: { $0 === cell })
        #expect(backer.writes == ["new"])
    }
}
