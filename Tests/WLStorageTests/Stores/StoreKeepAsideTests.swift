import Dispatch
import Foundation
import Synchronization
import Testing
@testable import WLStorage

/// "Bytes that do not decode are kept aside" and another program's value is never lost.
///
/// `StoreMedium.keepAside` copies the undecodable bytes to a `~corrupt-` key, then removes the key unconditionally
/// (`store.remove(key:)`). When another program stores a good value in between (the store is shared, as stores are
/// meant to be), that value is removed: it is neither kept aside nor adopted, and the storage goes on with its
/// default. The file backer does not lose it: it moves whatever stands at the name aside with a rename.
@Suite(.capturingOutput) struct StoreKeepAsideTests {
    @Test func aGoodValueStoredWhileBadBytesAreKeptAsideIsNotRemoved() throws {
        let store = HostileStore()
        store.writeFromOutside("k", json: "not json")
        store.onCreate = { store, key in
            // Another program repairs the key just as the bad bytes are being copied aside.
            if key.contains("~corrupt-") { store.state.withLock { $0.values["k"] = Data("42".utf8) } }
        }
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        let keptAside = try store.keys().filter { $0.hasPrefix("k~corrupt-") }
        #expect(keptAside.count == 1)
        let survived = store.stored("k") == "42" || keptAside.contains { store.stored($0) == "42" }
        #expect(survived || storage.wrappedValue == 42, "another program's value was removed and is lost")
    }
}
