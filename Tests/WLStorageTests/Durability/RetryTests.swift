import Testing

@testable import WLStorage

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

    /// A change made while what is stored is unknown is written only after a read; a tick whose read fails again arms
    /// the next, with the backoff, with no flush to come.
    @Test func aTickWhoseReadFailsAgainArmsTheNextRead() {
        let backer = RecordingBacker<Int>(stored: 7, failingReads: 3)
        let scheduler = ManualScheduler()
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
        #expect(storage.lastError != nil, "the first read did not fail")
        storage.wrappedValue = 1
        // The first tick and the retry of the first read read again, and fail; the next read finds the key readable.
        for _ in 0..<10 {
            guard let next = scheduler.pendingDelays.first else { break }
            scheduler.advance(by: .nanoseconds(next))
            if !storage.hasPendingChanges { break }
        }
        #expect(!storage.hasPendingChanges, "the change waits for a read that no tick will make")
        // The stored value, read at last, wins over a change based on another value (reported).
        #expect(storage.wrappedValue == 7)
        #expect(backer.writes.isEmpty)
    }

    /// A change made while what is stored is unknown waits for a read; a read that keeps failing is tried again after
    /// a growing delay, never at once in a loop, even before the first write gave the throttle a time to count from.
    @Test func aReadThatKeepsFailingUnderAPendingChangeIsRetriedAfterAGrowingDelayNotInALoop() {
        let backer = RecordingBacker<Int>(stored: 7, failingReads: 1_000)
        let scheduler = ManualScheduler()
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
        #expect(storage.lastError != nil, "the first read did not fail")
        storage.wrappedValue = 1
        scheduler.advance()
        #expect(backer.reads <= 3, "the reads were tried again at once, \(backer.reads) times")
        var delays: [UInt64] = []
        for _ in 0..<6 {
            guard let next = scheduler.pendingDelays.first else { break }
            delays.append(next)
            scheduler.advance(by: .nanoseconds(next))
        }
        #expect(delays.allSatisfy { $0 > 0 }, "a retry was due at once: \(delays)")
        #expect(backer.reads <= 12, "the reads were tried again in a loop, \(backer.reads) times")
        #expect(storage.hasPendingChanges)
    }

    /// A check that finds what is stored still unknown reads it, and that read is a try as a tick's is: when it fails
    /// under a pending change, the change's next try waits for the backoff instead of starting at once.
    @Test func aFailedReadStartedByACheckDelaysTheNextTryByTheBackoff() {
        var state = CellState<Int>(value: 0, stored: .unknown, throttle: WriteThrottle(interval: 0))
        var value = 1
        _ = state.changeLocally(to: &value)
        let now: UInt64 = 5_000_000_000
        guard let read = state.requestCheck(on: 1, now: now), case .reread = read else {
            Issue.record("the check did not read what is stored")
            return
        }
        var effects = JobEffects()
        let failure = WLStorageError(code: .readFailed, message: "injected", key: "k")
        _ = state.finish(
            read, .read(.failed(failure)), defaultValue: 0, key: "k", now: now, chaining: true, effects: &effects)
        let delay = effects.tick?.delay
        #expect(delay.map { $0 > 0 } ?? false, "the failed read was tried again at once: \(String(describing: delay))")
    }
}
