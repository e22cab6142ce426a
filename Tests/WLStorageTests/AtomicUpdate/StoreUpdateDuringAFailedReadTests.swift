import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

// An update made in the store by a write on condition tells the cell what the key holds. A read of the key that was
// already running, started while what is stored was unknown (the first read had failed), and that fails after the
// update, does not make it unknown again: changes made since build on the update's value, and are written.
@Suite(.onTestThreads) struct StoreUpdateDuringAFailedReadTests {
    @Test func aReadThatFailsAfterAStoreUpdateLeavesTheStoredValueKnownAndTheChangesSinceAreWritten() {
        var state = CellState<Int>(value: 0, stored: .unknown, throttle: WriteThrottle(interval: 1_000_000_000))
        guard case .reread? = state.requestCheck(on: 1, now: 1) else {
            Issue.record("no read of the key was started")
            return
        }
        let read = CellJob<Int>.reread(version: state.version)
        let (_, count) = state.startUpdate(counting: true)
        var updated = 1
        let (adoption, _, _) = state.adoptStoredUpdate(&updated, changeCount: count, written: Data(), on: 2)
        state.endUpdate()
        #expect(adoption == .adopted)
        var value = 2
        _ = state.changeLocally(to: &value)
        var effects = JobEffects()
        let failure = WLStorageError(code: .readFailed, message: "injected", key: "k")
        _ = state.finish(
            read, .read(.failed(failure)), defaultValue: 0, key: "k", now: 1, chaining: true, effects: &effects)
        #expect(state.stored == .known, "the update's value, stored, is unknown again")
        guard case .write(let written, _)? = state.startWork(on: 1, now: 2) else {
            Issue.record("the change made after the update is not written: it waits for a read that discards it")
            return
        }
        #expect(written == 2)
    }
}
