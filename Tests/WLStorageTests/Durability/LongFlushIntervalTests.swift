// Very long flush intervals.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct LongFlushIntervalTests {
    @Test func anIntervalOfAlmostUInt64MaxNanosecondsDoesNotWriteEveryChange() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(18_446_744_000), backer: backer, scheduler: scheduler)
        storage.wrappedValue = 1
        scheduler.advance()
        #expect(backer.writes == [1])
        storage.wrappedValue = 2
        scheduler.advance()
        scheduler.advance(by: .seconds(3_600))
        #expect(backer.writes == [1], "the second change was written at once")
        #expect(storage.hasPendingChanges)
    }

    @Test func anIntervalOfIntMaxSecondsStillWritesTheFirstChangeAtOnce() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(Int.max), backer: backer, scheduler: scheduler)
        storage.wrappedValue = 1
        scheduler.advance()
        #expect(backer.writes == [1], "the first change was not written")
    }
}
