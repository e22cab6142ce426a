import Testing

@testable import WLStorage

/// The throttle, driven by a manual clock: no test here sleeps.
@Suite struct ThrottleTests {
    let backer: RecordingBacker<Int>
    let scheduler = ManualScheduler()
    let storage: WLStorage<Int>

    init() {
        backer = RecordingBacker<Int>(stored: 0)
        storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
    }

    @Test func theFirstChangeIsWrittenAtOnce() {
        storage.wrappedValue = 1
        #expect(scheduler.pendingDelays == [0])
        scheduler.advance()
        #expect(backer.writes == [1])
    }

    @Test func changesWithinTheIntervalCollapseIntoOneWriteOfTheLatestValueAtItsEnd() {
        storage.wrappedValue = 1
        scheduler.advance()
        for value in 2...50 { storage.wrappedValue = value }
        #expect(scheduler.pendingDelays == [1_000_000_000])
        scheduler.advance(by: .milliseconds(999))
        #expect(backer.writes == [1])
        scheduler.advance(by: .milliseconds(1))
        #expect(backer.writes == [1, 50])
        #expect(!storage.hasPendingChanges)
    }

    @Test func theTrailingWriteIsOneIntervalAfterTheLastWriteStarted() {
        storage.wrappedValue = 1
        scheduler.advance()
        scheduler.advance(by: .milliseconds(700))
        storage.wrappedValue = 2
        #expect(scheduler.pendingDelays == [300_000_000])
    }

    @Test func aChangeAfterAQuietIntervalIsWrittenAtOnceAgain() {
        storage.wrappedValue = 1
        scheduler.advance()
        scheduler.advance(by: .seconds(5))
        storage.wrappedValue = 2
        #expect(scheduler.pendingDelays == [0])
        scheduler.advance()
        #expect(backer.writes == [1, 2])
    }

    @Test func noWriteIsScheduledWhenNothingChanges() {
        _ = storage.wrappedValue
        scheduler.advance(by: .seconds(10))
        #expect(scheduler.pendingJobs == 0)
        #expect(backer.writes.isEmpty)
    }

    @Test func flushWritesNowAndThePendingTickThenDoesNothing() {
        storage.wrappedValue = 1
        scheduler.advance()
        storage.wrappedValue = 2
        storage.flush()
        #expect(backer.writes == [1, 2])
        scheduler.advance(by: .seconds(1))
        #expect(backer.writes == [1, 2])
    }

    @Test func aChangeAfterAFlushWaitsOneIntervalFromTheFlush() {
        storage.wrappedValue = 1
        storage.flush()
        scheduler.advance(by: .milliseconds(400))
        storage.wrappedValue = 2
        // The leading tick armed by the first change is stale; the new one is due 600 ms from now.
        #expect(scheduler.pendingDelays.last == 600_000_000)
        scheduler.advance(by: .milliseconds(599))
        #expect(backer.writes == [1])
        scheduler.advance(by: .milliseconds(1))
        #expect(backer.writes == [1, 2])
    }

    @Test func aFailedWriteKeepsTheValuePendingAndTheNextTickRetriesIt() {
        backer.failNextWrites(2)
        storage.wrappedValue = 1
        scheduler.advance()
        #expect(backer.writes.isEmpty)
        #expect(storage.hasPendingChanges)
        #expect(storage.lastError?.code == .backerFailed)
        #expect(scheduler.pendingDelays == [1_000_000_000])
        scheduler.advance(by: .seconds(1))
        #expect(backer.writes.isEmpty)
        storage.wrappedValue = 2
        scheduler.advance(by: .seconds(1))
        #expect(backer.writes == [2])
        #expect(storage.lastError == nil)
        #expect(!storage.hasPendingChanges)
    }
}

@Suite struct ManualFlushTests {
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

@Suite struct InitialReadTests {
    @Test func theDefaultIsUsedAndSavedWhenTheBackerHoldsNothing() {
        let backer = RecordingBacker<[String]>()
        let scheduler = ManualScheduler()
        let storage = WLStorage(
            defaultValueClosure: { ["x"] }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
        #expect(storage.wrappedValue == ["x"])
        scheduler.advance()
        #expect(backer.writes == [["x"]])
    }

    @Test func aStoredValueIsReadAndNotWrittenBack() {
        let backer = RecordingBacker<Int>(stored: 7)
        let scheduler = ManualScheduler()
        var calls = 0
        let storage = WLStorage(
            defaultValueClosure: {
                calls += 1
                return 0
            }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
        #expect(storage.wrappedValue == 7)
        #expect(calls == 0)
        scheduler.advance(by: .seconds(2))
        #expect(backer.writes.isEmpty)
    }

    @Test func aFailedReadGivesTheDefaultReportsTheErrorAndWritesNothing() {
        let backer = RecordingBacker<Int>(stored: 7)
        backer.failReads()
        let scheduler = ManualScheduler()
        let storage = WLStorage(
            defaultValueClosure: { 1 }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
        #expect(storage.wrappedValue == 1)
        #expect(storage.lastError?.code == .backerFailed)
        #expect(storage.lastError?.underlying is BackerFailure)
        scheduler.advance(by: .seconds(2))
        #expect(backer.writes.isEmpty)
    }
}
