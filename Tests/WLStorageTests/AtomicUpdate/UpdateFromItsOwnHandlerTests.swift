// An update made by a handler of the storage's own changes, while an update of the same storage tells it of its value:
// the storage knows the key as the last write left it, so the next check finds nothing new to take or tell.
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput) struct UpdateFromItsOwnHandlerTests {
    @Test func anUpdateMadeByTheHandlerOfAnUpdateIsTheWriteTheStorageKnowsLast() throws {
        let store = MemoryStore()
        store.writeUnreported("counter", json: "1")
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        try #require(storage.wrappedValue == 1)
        // Told of the update's 2 before that update returns, the handler adds 10 with an update of its own.
        let toldOfTwelve = Switch(false)
        let subscription = storage.onChange(queue: nil) { value in
            if value == 2 { storage.update { $0 += 10 } }
            if value == 12 { toldOfTwelve.tally() }
        }
        defer { subscription.cancel() }
        storage.update { $0 += 1 }
        #expect(store.stored("counter") == "12")
        #expect(storage.wrappedValue == 12)
        #expect(hasHeardWhatIsStored(storage), "the storage takes the first update's 2 as the last version it wrote")
        // The handler is told of 12 once (by a package thread: this one was telling it of 2). A check then, as the
        // feed's news of the write brings, finds the storage's own write: nothing to take, nor to tell again.
        #expect(eventually(timeout: 60) { toldOfTwelve.tallied == 1 })
        storage.cell.checkForExternalChange()
        #expect(storage.wrappedValue == 12)
        #expect(toldOfTwelve.tallied == 1, "the check took the storage's own write for another program's change")
    }
}
