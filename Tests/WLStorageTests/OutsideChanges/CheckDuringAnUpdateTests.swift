import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

/// A check for another program's change that runs while an update of the same storage is written: whatever the order
/// of the two, the storage ends on what the key holds.
@Suite(.onTestThreads) struct CheckDuringAnUpdateTests {
    /// A check starts while an update's write is on its way, and reads only after the update has stored 6 and another
    /// program 7: the value it read came after the update, but the update moved the cell's version meanwhile, so the
    /// check does not adopt it. The storage must not stay on 6 while the key holds 7.
    @Test func aCheckThatReadsAfterAnUpdateWasWrittenEndsOnWhatTheKeyHolds() throws {
        let store = InterceptedStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 5
        storage.flush()
        #expect(store.base.stored("counter") == "5")

        // While the update's write is on its way, a change is reported: its check starts, and stops at the gate
        // before it reads (the gate is set after the update's own read).
        let gate = Lock<(entered: DispatchSemaphore, open: DispatchSemaphore)?>(nil)
        let entered = Lock(false)
        store.afterNextConditionalWrite {
            let held = store.holdNextRead()
            gate.withLock { $0 = held }
            store.base.report(.key("counter"))
            entered.withLock { $0 = held.entered.wait(timeout: .now() + 60) == .success }
        }
        storage.update { $0 += 1 }
        #expect(entered.withLock { $0 })
        #expect(store.base.stored("counter") == "6")
        // Another program stores 7 after the update, and says so while the check still waits.
        store.base.writeFromOutside("counter", json: "7")
        store.base.report(.key("counter"))

        gate.withLock { $0 }?.open.signal()
        #expect(eventually(timeout: 30) { storage.wrappedValue == 7 }, "the storage holds \(storage.wrappedValue)")
        #expect(store.base.stored("counter") == "7")
    }
}
