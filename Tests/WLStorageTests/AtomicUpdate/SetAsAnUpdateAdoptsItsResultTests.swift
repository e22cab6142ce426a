// A set made, and flushed, as an update in a store that writes on condition takes the value it stored: the set's write
// goes onto what the key holds as a change of the update's result, not of what the update read, so it neither makes the
// update again nor undoes another program's change made since.
import Dispatch
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct SetAsAnUpdateAdoptsItsResultTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    /// An update increments `a`; another program increments it again just after; a set of `b`, flushed (by another
    /// thread, in a program) while the update takes its result, keeps both increments.
    @Test func aSetFlushedAsAnUpdateTakesItsResultKeepsAnotherProgramsLaterChange() throws {
        let key = "pair"
        let store = InterceptedStore(feed: .announced)
        store.base.writeUnreported(key, json: #"{"a":1,"b":1}"#)
        let clock = ClockWithAHook()
        let storage = WLStorage<Pair>(
            defaultValueClosure: { Pair(a: 0, b: 0) }, flushInterval: nil,
            binding: KeyBinding(key: key, store: store), migrations: [], scheduler: clock)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        store.afterNextConditionalWrite {
            // Another program's increment, made once the update's is stored.
            store.base.writeUnreported(key, json: #"{"a":3,"b":1}"#)
            // The update, on this thread, reads the clock as it takes its result: the set and its flush come then.
            clock.onNextReading {
                storage.wrappedValue.b = 9
                _ = storage.cell.flush()
            }
        }
        storage.update { $0.a += 1 }
        storage.flush()
        let held = try JSONDecoder().decode(Pair.self, from: Data(try #require(store.base.stored(key)).utf8))
        #expect(held == Pair(a: 3, b: 9))
        #expect(!storage.hasPendingChanges)
    }

    /// The same, with a check of the key in flight as the update takes its result: the set, flushed once the check
    /// ends, still goes on as a change of the update's result.
    @Test func aSetFlushedAfterACheckInFlightAsAnUpdateTookItsResultKeepsAnotherProgramsLaterChange() throws {
        let key = "pair"
        let store = InterceptedStore(feed: .announced)
        store.base.writeUnreported(key, json: #"{"a":1,"b":1}"#)
        let storage = WLStorage(key: key, defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        store.afterNextConditionalWrite {
            store.base.writeUnreported(key, json: #"{"a":3,"b":1}"#)
        }
        let released = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        storage.update { value in
            // A check starts on another thread and is held once it has read the key, until the set is made.
            let reached = store.holdNextRead(afterReadingUntil: released)
            Thread {
                storage.cell.checkForExternalChange()
                checked.signal()
            }.start()
            #expect(reached.wait(timeout: .now() + 60) == .success)
            value.a += 1
        }
        storage.wrappedValue.b = 9
        released.signal()
        #expect(checked.wait(timeout: .now() + 60) == .success)
        storage.flush()
        let held = try JSONDecoder().decode(Pair.self, from: Data(try #require(store.base.stored(key)).utf8))
        #expect(held == Pair(a: 3, b: 9))
        #expect(!storage.hasPendingChanges)
    }
}
