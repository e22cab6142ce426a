import Testing
@testable import WLStorage

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
