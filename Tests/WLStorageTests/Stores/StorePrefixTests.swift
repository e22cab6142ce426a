// Prefixed stores share the keys of their root store, and bytes kept aside are an ordinary key.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// Prefixes that overlap, nest or are empty, and keys that look like kept-aside keys: each key of the root store
/// has one cell, whatever path led to it.
@Suite(.capturingOutput) struct StorePrefixTests {
    @Test func overlappingAndNestedPrefixesShareTheRootKeysCell() {
        let store = MemoryStore()
        let root = WLStorage(key: "a.b.c", defaultValue: 0, flushInterval: nil, store: store)
        let empty = WLStorage(key: "a.b.c", defaultValue: 0, flushInterval: nil, store: store.prefixed(""))
        let nested = WLStorage(
            key: "c", defaultValue: 0, flushInterval: nil, store: store.prefixed("a.").prefixed("b."))
        let overlapping = WLStorage(key: "b.c", defaultValue: 0, flushInterval: nil, store: store.prefixed("a."))
        nested.wrappedValue = 7
        #expect(root.wrappedValue == 7 && empty.wrappedValue == 7 && overlapping.wrappedValue == 7)
        overlapping.flush()
        #expect(store.stored("a.b.c") == "7")
        #expect(store.stored("b.a.c") == nil)
        store.writeFromOutside("a.b.c", json: "8")
        #expect(eventually { nested.wrappedValue == 8 })
    }

    @Test func aKeyNamedLikeAKeptAsideKeyIsAnOrdinaryKey() throws {
        let store = MemoryStore()
        let aside = "k~corrupt-20240101T000000Z-0123456789abcdef"
        store.writeFromOutside("k", json: "not json")
        store.writeFromOutside(aside, json: "5")
        let k = WLStorage(key: "k", defaultValue: 1, flushInterval: nil, store: store)
        let keptAside = WLStorage(key: aside, defaultValue: 0, flushInterval: nil, store: store)
        #expect(k.wrappedValue == 1)
        #expect(keptAside.wrappedValue == 5)
        #expect(store.stored(aside) == "5")  // not replaced by the new kept-aside copy
        let asides = try store.keys().filter { $0.hasPrefix("k~corrupt-") && $0 != aside }
        #expect(asides.count == 1)
        #expect(asides.first.flatMap(store.stored) == "not json")
    }
}
