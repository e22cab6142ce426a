import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// `@WLStorage(key: "theme") var theme = "dark"`: the property's initial value is the storage's default.
@Suite(.capturingOutput)
struct InitialValueTests {
    private struct InStore {
        @WLStorage(key: "size", flushInterval: nil, store: MemoryStore(identity: "memory:initial-value-tests"))
        var size = 13
    }

    @Test func theInitialValueIsTheDefaultAndAStoredValueWinsOverIt() throws {
        try withTemporaryDirectory { directory in
            do {
                let theme = WLStorage(
                    wrappedValue: "dark", key: "theme", flushInterval: nil, store: .directory(directory))
                #expect(theme.wrappedValue == "dark")
                theme.flush()
                // Saved where nothing is stored, as a default is.
                #expect(stored(String.self, key: "theme", in: directory) == "dark")
                theme.wrappedValue = "light"
                theme.flush()
            }
            let again = WLStorage(wrappedValue: "dark", key: "theme", flushInterval: nil, store: .directory(directory))
            #expect(again.wrappedValue == "light")
        }
    }

    @Test func theInitialValueFormWorksWithAStoreAndWithABacker() {
        let inStore = InStore()
        #expect(inStore.size == 13)
        inStore.size = 14
        #expect(inStore.size == 14)

        // The initial value is made only when the backer holds nothing.
        let made = Switch(false)
        func initial() -> Int {
            made.tally()
            return 0
        }
        let held = WLStorage(wrappedValue: initial(), flushInterval: nil, backer: RecordingBacker<Int>(stored: 7))
        #expect(held.wrappedValue == 7)
        #expect(made.tallied == 0)
        let empty = WLStorage(wrappedValue: initial(), flushInterval: nil, backer: RecordingBacker<Int>())
        #expect(empty.wrappedValue == 0)
        #expect(made.tallied == 1)
    }
}
