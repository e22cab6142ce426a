// A flush of every storage of a store takes each storage's change into its batch unless it must be written on its own:
// a job of the storage that ends just before the take (a check that sees another program's change) still has the
// change written on its own, onto that other change, not whole in the batch over it.
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput) struct ChangeSeenAsAFlushOfEveryStorageTakesItTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    /// A check (another thread's, in a program) sees another program's change of another field while the flush of
    /// every storage is about to take this program's change: both changes are kept.
    @Test func anotherProgramsChangeACheckSeesAsTheBatchTakesTheChangeIsKept() throws {
        let store = InterceptedStore(feed: .announced)
        store.base.writeUnreported("pair", json: #"{"a":1,"b":1}"#)
        let clock = ClockWithAHook()
        let storage = WLStorage<Pair>(
            defaultValueClosure: { Pair(a: 0, b: 0) }, flushInterval: nil,
            binding: KeyBinding(key: "pair", store: store), migrations: [], scheduler: clock)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        storage.wrappedValue.a = 2
        store.base.writeUnreported("pair", json: #"{"a":1,"b":5}"#)
        // The batch, on this thread, reads the clock just before it takes the change.
        clock.onNextReading { storage.cell.checkForExternalChange() }
        flushAllStores([store])
        storage.flush()
        #expect(store.base.stored("pair") == #"{"a":2,"b":5}"#)
        #expect(!storage.hasPendingChanges)
    }
}
