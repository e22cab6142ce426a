import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

// The cell's transitions that decide what gives way to another program's value, driven on `CellState` alone at the
// moments a real storage reaches only by a race: a rewrite of a value read in an earlier shape, or a removal of
// unknown fields, is not a change of this process, and never replaces what another program stored after the read.
@Suite(.onTestThreads) struct GivingWayTransitionTests {
    private static let anotherVersion = WLStorageError(
        code: .storedByAnotherVersion, message: "another version", key: "k")

    private static func makeState() -> CellState<Int> {
        CellState(value: 100, stored: .known, throttle: WriteThrottle(interval: 1_000_000_000))
    }

    private static func finish(_ job: CellJob<Int>, _ outcome: JobOutcome<Int>, in state: inout CellState<Int>)
        -> CellJob<Int>?
    {
        var effects = JobEffects()
        return state.finish(job, outcome, defaultValue: 0, key: "k", now: 0, chaining: true, effects: &effects)
    }

    /// A storage opens the key on a value in an earlier shape and registers its cell; another storage of the key finds
    /// the cell and sets before the first marks the rewrite. That set is a change of this process, which wins over an
    /// earlier change of another program: it must not become a rewrite, which gives way to it.
    @Test func aSetMadeBeforeTheOpeningStorageMarksItsRewriteStaysAChange() {
        var state = Self.makeState()
        var value = 5
        _ = state.changeLocally(to: &value)
        _ = state.rewriteRead()
        #expect(state.isPending)
        #expect(!state.onlyRewriteOrDropPending, "the set was taken for the rewrite of the value read")
        #expect(!state.isRewrite(state.version))
    }

    /// A check started before the rewrite was marked finds another version's bytes: the rewrite of the value read
    /// before them gives way, as one marked before the check does.
    @Test func aRewriteMarkedWhileACheckRunsGivesWayToAnotherVersionsValueTheCheckFinds() {
        var state = Self.makeState()
        let check = state.requestCheck(on: 1, now: 1)!
        _ = state.rewriteRead()
        #expect(state.isPending, "no rewrite was marked")
        let next = Self.finish(check, .reported(Self.anotherVersion), in: &state)
        #expect(next == nil)
        #expect(!state.isPending, "the rewrite would replace another version's bytes with no change made")
    }

    /// A check started before the rewrite was marked finds another program's value: the rewrite of the value read
    /// before it gives way, and the cell takes that value, as when the rewrite was marked before the check.
    @Test func aRewriteMarkedWhileACheckRunsGivesWayToAChangeTheCheckFinds() {
        var state = Self.makeState()
        let check = state.requestCheck(on: 1, now: 1)!
        _ = state.rewriteRead()
        let next = Self.finish(check, .checked(.changed(7)), in: &state)
        #expect(next == nil)
        #expect(state.value == 7, "the cell kept the value read before the other program's change")
        #expect(!state.isPending, "the rewrite would replace the other program's value with the one read before")
    }

    /// The same check finds the key removed: the rewrite gives way to the removal, and the cell goes back to its
    /// default.
    @Test func aRewriteMarkedWhileACheckRunsGivesWayToARemovalTheCheckFinds() {
        var state = Self.makeState()
        let check = state.requestCheck(on: 1, now: 1)!
        _ = state.rewriteRead()
        let next = Self.finish(check, .checked(.removed), in: &state)
        #expect(next == nil)
        #expect(state.value == 0, "the cell kept the value read before the removal")
        #expect(!state.isPending, "the rewrite would undo the removal")
    }

    /// Another version's bytes seen by a check: the rewrite at open is not marked over them.
    @Test func noRewriteIsMarkedOverAnotherVersionsValueSeenSinceTheOpen() {
        var state = Self.makeState()
        let check = state.requestCheck(on: 1, now: 1)!
        _ = Self.finish(check, .reported(Self.anotherVersion), in: &state)
        let needsTick = state.rewriteRead()
        #expect(!needsTick)
        #expect(!state.isPending, "the value read at open would replace another version's bytes")
    }

    /// `removeUnknownFields()` while the write of a set is in flight: once that write ends, the removal is alone, and
    /// gives way to another version's bytes a check finds, instead of writing the value over them.
    @Test func aRemovalAskedForWhileASetIsWrittenGivesWayToAnotherVersionsValueFoundAfter() {
        var state = Self.makeState()
        var value = 1
        _ = state.changeLocally(to: &value)
        let write = state.startWork(on: 1, now: 0)!
        state.dropUnknownFields()
        let next = Self.finish(write, .written, in: &state)
        #expect(next == nil)
        #expect(state.onlyRewriteOrDropPending, "the removal alone is taken for a change of the value")
        let check = state.requestCheck(on: 1, now: 1)!
        _ = Self.finish(check, .reported(Self.anotherVersion), in: &state)
        #expect(!state.isPending, "the removal would write the value over another version's bytes")
    }

    /// A check that finds another version's bytes can end between the storage's look at the cell and its removal of
    /// unknown fields: with nothing pending, the removal is then not made, as it is not when asked for after the check.
    @Test func aRemovalOfUnknownFieldsOverAnotherVersionsValueWithNothingPendingMarksNothing() {
        var state = Self.makeState()
        let check = state.requestCheck(on: 1, now: 1)!
        _ = Self.finish(check, .reported(Self.anotherVersion), in: &state)
        state.dropUnknownFields()
        #expect(!state.isPending, "the removal would write the value over another version's bytes")
    }

    /// A removal of unknown fields asked for while an update is made in the store, with no change pending, is no change
    /// of the value: the update's value, stored, is the value, and the removal is written with it, not the value from
    /// before the update.
    @Test func aRemovalOfUnknownFieldsAskedForDuringAStoreUpdateGoesWithTheUpdatesValue() {
        var state = Self.makeState()
        let count = state.startUpdate(counting: true).changeCount
        state.dropUnknownFields()
        var stored = 101
        let (adoption, _, _) = state.adoptStoredUpdate(&stored, changeCount: count, written: Data(), on: 2)
        #expect(adoption == .adopted, "the update gave way to a removal of unknown fields, as to a newer change")
        #expect(state.value == 101, "the value from before the update would be written over it")
        #expect(state.onlyRewriteOrDropPending, "the removal is not left to write")
    }

    /// The same removal asked for over a set not yet written goes with that set, which another version's bytes do not
    /// stop.
    @Test func aRemovalAskedForOverASetNotWrittenGoesWithTheSet() {
        var state = Self.makeState()
        var value = 1
        _ = state.changeLocally(to: &value)
        state.dropUnknownFields()
        #expect(!state.onlyRewriteOrDropPending)
        let check = state.requestCheck(on: 1, now: 1)!
        _ = Self.finish(check, .reported(Self.anotherVersion), in: &state)
        #expect(state.isPending, "the set gave way to another version's bytes found before it was written")
    }
}
