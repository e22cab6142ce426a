import Testing
@testable import WLStorage

@Suite(.capturingOutput) struct ManualFlushTests {
    @Test func aNilIntervalWritesNothingUntilFlush() {
        let backer = RecordingBacker<String>(stored: "a")
        let scheduler = ManualScheduler()
        let storage = WLStorage(defaultValueClosure: { "" }, flushInterval: nil, backer: backer, scheduler: scheduler)
        storage.wrappedValue = "b"
        storage.wrappedValue = "c"
        scheduler.advance(by: .seconds(60))
        #expect(scheduler.pendingJobs == 0)
        #expect(backer.writes.isEmpty)
        storage.flush()
        #expect(backer.writes == ["c"])
    }

    @Test func aFailedFlushIsRetriedByTheNextFlush() {
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: nil, backer: backer, scheduler: ManualScheduler())
        backer.failNextWrites(1)
        storage.wrappedValue = 5
        storage.flush()
        #expect(backer.writes.isEmpty)
        #expect(storage.hasPendingChanges)
        storage.flush()
        #expect(backer.writes == [5])
    }

    @Test func flushWithNothingPendingWritesNothing() {
        let backer = RecordingBacker<Int>(stored: 3)
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: nil, backer: backer, scheduler: ManualScheduler())
        storage.flush()
        #expect(storage.wrappedValue == 3)
        #expect(backer.writes.isEmpty)
    }
}
