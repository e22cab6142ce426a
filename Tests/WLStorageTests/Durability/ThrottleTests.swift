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

@Suite(.capturingOutput) struct RetryTests {
    @Test func aZeroIntervalRetriesAFailingWriteAfterAGrowingDelayNotInALoop() {
        let backer = RecordingBacker<Int>(stored: 0)
        let scheduler = ManualScheduler()
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: .zero, backer: backer, scheduler: scheduler)
        backer.failNextWrites(1_000)
        storage.wrappedValue = 1
        scheduler.advance()
        var delays: [UInt64] = []
        for _ in 0..<12 {
            guard let next = scheduler.pendingDelays.first else { break }
            delays.append(next)
            scheduler.advance(by: .nanoseconds(next))
        }
        #expect(
            delays == [
                100_000_000, 200_000_000, 400_000_000, 800_000_000, 1_600_000_000, 3_200_000_000, 6_400_000_000,
                12_800_000_000, 25_600_000_000, 30_000_000_000, 30_000_000_000, 30_000_000_000,
            ])
        #expect(storage.hasPendingChanges)
    }
}

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

@Suite(.capturingOutput) struct InitialReadTests {
    @Test func theDefaultIsMadeOnceEvenWhenTheBackerMakesItAndThenThrows() {
        final class MakesThenThrows: WLStorageBacker {
            let key = "throws"
            func read(defaultValueClosure: () -> Int) throws -> Int {
                _ = defaultValueClosure()
                throw BackerFailure()
            }
            func write(value: Int) {}
        }
        var made = 0
        let storage = WLStorage(
            defaultValueClosure: {
                made += 1
                return 4
            }, flushInterval: nil, backer: MakesThenThrows(), scheduler: ManualScheduler())
        #expect(made == 1)
        #expect(storage.wrappedValue == 4)
        #expect(storage.lastError?.code == .backerFailed)
        #expect(!storage.hasPendingChanges)
    }

    @Test func theDefaultIsUsedButACustomBackerIsNeverWrittenWithIt() {
        // Only the file backer saves a default, and only where nothing is stored: a default is not a change.
        let backer = RecordingBacker<[String]>()
        let scheduler = ManualScheduler()
        let storage = WLStorage(
            defaultValueClosure: { ["x"] }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
        #expect(storage.wrappedValue == ["x"])
        scheduler.advance(by: .seconds(2))
        storage.flush()
        #expect(backer.writes.isEmpty)
        #expect(!storage.hasPendingChanges)
    }

    @Test func aStoredValueIsReadAndNotWrittenBackAndTheDefaultIsNotMade() {
        let backer = RecordingBacker<Int>(stored: 7)
        let scheduler = ManualScheduler()
        var calls = 0
        let storage = WLStorage(
            defaultValueClosure: {
                calls += 1
                return 0
            }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
        #expect(storage.wrappedValue == 7)
        // A custom backer that holds a value never asks for the default (nor sees a removal): it is not made.
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
