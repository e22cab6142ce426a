// A storage of a key of a store of a program's own that keeps versions and tags writes, let go while its change's tagged
// write waits in the store and loses its answer: the release waits for it, and another program's newer change stays
// (Guarantees.md).
import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput, .serialized) struct ReleaseDuringATaggedChangeWriteTests {
    struct Tally: Codable, Sendable, Equatable {
        var count = 0
        var name = ""
        var other = 0
    }

    static let key = "tally"

    /// A storage let go while its change's tagged write, started by its throttle on the shared queue, waits inside the
    /// store, whose answer to it is then lost: the release waits for the write, which is found made and not made again
    /// over another program's change of the same field, and nothing is left pending.
    @Test func aStorageLetGoWhileItsTaggedChangeWriteWaitsKeepsAnotherProgramsNewerChange() throws {
        let store = VersionedMemoryStore()
        store.writeFromOutside(Self.key, json: #"{"count":1,"name":"a","other":0}"#)
        let entered = DispatchSemaphore(value: 0)
        let open = DispatchSemaphore(value: 0)
        do {
            let storage = WLStorage(key: Self.key, defaultValue: Tally(), flushInterval: 1, store: store)
            try #require(storage.wrappedValue.count == 1)
            store.loseNextAnswer(.afterTheWrite) {
                entered.signal()
                open.wait()
                store.writeFromOutside(Self.key, json: #"{"count":3,"name":"a","other":0}"#)
            }
            storage.wrappedValue.count = 2
            #expect(entered.wait(timeout: .now() + 60) == .success, "the throttle's write did not start")
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { open.signal() }
        }
        #expect(
            eventually(timeout: 60) { store.stored(Self.key) == #"{"count":3,"name":"a","other":0}"# },
            "holds \(String(describing: store.stored(Self.key)))")
        // Once the key is quiet, the store keeps what the other program wrote.
        let reopened = WLStorage(key: Self.key, defaultValue: Tally(), flushInterval: nil, store: store)
        #expect(reopened.wrappedValue == Tally(count: 3, name: "a", other: 0))
    }
}
