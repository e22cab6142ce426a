// Keys a feed reports during a round of checks are adopted in the order they were reported.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// The changes a feed reports while a round of checks runs are handed to their storages in the order they were
/// reported: a program that writes one key and then another is seen to do so, as a replica that waits for the second
/// key (a marker) to know the first is in relies on.
@Suite(.capturingOutput) struct StoreFeedOrderTests {
    @Test func keysReportedDuringARoundAreAdoptedInTheOrderReported() throws {
        let store = MemoryStore()
        let gate = WLStorage(key: "gate", defaultValue: 0, flushInterval: nil, store: store)
        let keys = (0..<20).map { "key\($0)" }
        let storages = keys.map { WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store) }
        // Their defaults saved first: a check asked for while a cell's job is in flight is left to that job.
        gate.flush()
        storages.forEach { $0.flush() }
        let adopted = Lock<[String]>([])
        let subscriptions = zip(keys, storages).map { key, storage in
            storage.onChange(queue: nil) { _ in adopted.withLock { $0.append(key) } }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        // The round that adopts the gate's change is held in the gate's handler while the keys are reported.
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let gateSubscription = gate.onChange(queue: nil) { _ in
            held.signal()
            _ = release.wait(timeout: .now() + 30)
        }
        defer { gateSubscription.cancel() }
        store.writeFromOutside("gate", json: "1")
        try #require(held.wait(timeout: .now() + 30) == .success, "the gate's change was never adopted")
        for key in keys { store.writeFromOutside(key, json: "1") }
        release.signal()
        #expect(eventually { adopted.withLock { $0.count } == keys.count })
        #expect(adopted.withLock { $0 } == keys)
    }
}
