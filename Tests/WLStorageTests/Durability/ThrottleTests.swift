import Testing

@testable import WLStorage

/// The throttle, driven by a manual clock: no test here sleeps.
@Suite(.capturingOutput) struct ThrottleTests {
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

    @Test func aFailedWriteKeepsTheValuePendingAndIsRetriedWithGrowingDelays() {
        backer.failNextWrites(2)
        storage.wrappedValue = 1
        scheduler.advance()
        #expect(backer.writes.isEmpty)
        #expect(storage.hasPendingChanges)
        #expect(storage.lastError?.code == .backerFailed)
        #expect(scheduler.pendingDelays == [1_000_000_000])
        scheduler.advance(by: .seconds(1))
        #expect(backer.writes.isEmpty)
        // The second failure in a row doubles the wait.
        #expect(scheduler.pendingDelays == [2_000_000_000])
        storage.wrappedValue = 2
        scheduler.advance(by: .seconds(2))
        #expect(backer.writes == [2])
        #expect(storage.lastError == nil)
        #expect(!storage.hasPendingChanges)
        // After a success the throttle is back to one interval.
        storage.wrappedValue = 3
        #expect(scheduler.pendingDelays == [1_000_000_000])
    }

    @Test func aTickArmedWhenNothingIsPendingDoesNotStopLaterWrites() {
        storage.wrappedValue = 1
        scheduler.advance()
        // What a set racing a flush leaves behind: a tick armed after the flush wrote the value.
        storage.cell.armTick()
        scheduler.advance(by: .seconds(1))
        storage.wrappedValue = 2
        #expect(scheduler.pendingJobs == 1, "the change armed no tick")
        scheduler.advance(by: .seconds(1))
        #expect(backer.writes == [1, 2])
        #expect(!storage.hasPendingChanges)
    }
}
