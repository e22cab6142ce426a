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
}
