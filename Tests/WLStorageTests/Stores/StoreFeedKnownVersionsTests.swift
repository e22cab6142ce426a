// A store's change back to a version a backer saw earlier is adopted: the value stored last wins.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// "The value stored last wins": a store's change is adopted unless a local change is pending.
///
/// A backer tells its own versions from others' by the one version it saw last (`KnownVersions`): a change reported by
/// the feed whose bytes are that version is taken for "unchanged", and any other is a change. So when another program
/// stores again a version this backer read (or wrote) earlier, after it has since written (or read) another, the
/// change is adopted: a backer that remembered every version it saw would keep its value while the store holds the
/// other one, for good.
@Suite(.capturingOutput) struct StoreFeedKnownVersionsTests {
    @Test func anOutsideChangeBackToTheValueReadAtStartIsAdopted() {
        let store = MemoryStore()
        store.writeFromOutside("theme", json: #""dark""#)
        let storage = WLStorage(key: "theme", defaultValue: "", flushInterval: nil, store: store)
        #expect(storage.wrappedValue == "dark")
        storage.wrappedValue = "light"
        storage.flush()
        #expect(store.stored("theme") == #""light""#)

        // Another program sets it back: the store holds "dark", last.
        store.writeFromOutside("theme", json: #""dark""#)
        #expect(eventually { hasHeardWhatIsStored(storage) && !storage.hasPendingChanges })
        #expect(
            eventually(timeout: 30) { storage.wrappedValue == "dark" }, "the storage kept a value the store replaced")
        #expect(store.stored("theme") == #""dark""#)
    }

    @Test func anOutsideChangeBackToAValueWrittenEarlierIsAdopted() {
        let store = MemoryStore()
        store.writeFromOutside("mode", json: #""a""#)
        let storage = WLStorage(key: "mode", defaultValue: "", flushInterval: nil, store: store)
        storage.wrappedValue = "b"
        storage.flush()
        store.writeFromOutside("mode", json: #""c""#)
        #expect(eventually { storage.wrappedValue == "c" })
        // Another program stores "b" again: the store holds "b", last.
        store.writeFromOutside("mode", json: #""b""#)
        #expect(eventually(timeout: 30) { storage.wrappedValue == "b" }, "the storage kept a value the store replaced")
    }

    @Test func aCustomBackersChangeBackToTheValueReadAtStartIsAdopted() {
        let backer = ObservableMemoryBacker(stored: 1)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
        #expect(storage.wrappedValue == 1)
        storage.wrappedValue = 2
        storage.flush()
        #expect(backer.stored == 2)
        backer.setFromOutside(1)
        #expect(eventually(timeout: 30) { storage.wrappedValue == 1 }, "the storage kept a value the backer replaced")
    }
}
