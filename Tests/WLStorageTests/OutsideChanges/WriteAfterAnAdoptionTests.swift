// A value the cell takes from another program (a check, or a read) is the base of the changes made after it: the cell
// starts no write until its backer has taken the bytes of that value as the base, or the write would take as changes of
// this process what the other program changed, and put them back over a newer change of the same fields.
import Dispatch
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.onTestThreads) struct WriteAfterAnAdoptionTests {
    static func makeState() -> CellState<Int> {
        CellState(value: 1, stored: .known, throttle: WriteThrottle(interval: 0))
    }

    /// A check finds another program's value and the cell takes it; a set and a flush on another thread come before the
    /// check's thread has told the backer: the flush waits, rather than writing against the bytes before the value.
    @Test func aFlushRightAfterACheckTookAValueWaitsForTheBackerToTakeItsBytes() throws {
        var state = Self.makeState()
        guard let check = state.requestCheck(on: 1, now: 1) else {
            Issue.record("no check was started")
            return
        }
        var effects = JobEffects()
        let next = state.finish(
            check, .checked(.changed(3)), defaultValue: 0, key: "k", now: 1, chaining: false, effects: &effects)
        #expect(next == nil)
        try #require(effects.adoptSeen && state.value == 3)
        Self.expectASetsFlushToWait(&state)
    }

    /// The same after a read of the key (a default's save that found a value stored): the value read is the base.
    @Test func aFlushRightAfterAReadTookAValueWaitsForTheBackerToTakeItsBytes() throws {
        var state = CellState<Int>(value: 0, stored: .unknown, throttle: WriteThrottle(interval: 0))
        guard case .reread(let version)? = state.requestCheck(on: 1, now: 1) else {
            Issue.record("no read of the key was started")
            return
        }
        var effects = JobEffects()
        let next = state.finish(
            .reread(version: version), .read(.value(3)), defaultValue: 0, key: "k", now: 1, chaining: false,
            effects: &effects)
        #expect(next == nil)
        try #require(effects.adoptSeen && state.value == 3)
        Self.expectASetsFlushToWait(&state)
    }

    /// A set and a flush on another thread: the flush waits for the job, rather than starting a write.
    static func expectASetsFlushToWait(_ state: inout CellState<Int>) {
        var value = 4
        _ = state.set(&value)
        var target: UInt64?
        let step = state.flushStep(on: 2, now: 2, upTo: &target, waitingForJobs: true)
        guard case .wait = step else {
            Issue.record("a write started before the backer took the value's bytes as its base: \(step)")
            return
        }
    }
}
