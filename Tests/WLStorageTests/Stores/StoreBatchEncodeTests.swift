// A value whose encoding flushes everything from inside a batch does not hang.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct StoreBatchEncodeTests {
    /// A value whose encoding (run by `takeBatchWrite` with the cell busy on the flushing thread) calls `flushAll` and
    /// flushes its own storage: both return, and every value is written.
    @Test func aValueWhoseEncodingFlushesEverythingInsideABatchDoesNotHang() {
        struct Loud: Codable, Sendable {
            var n: Int
            static let storage = Lock<WLStorage<Loud>?>(nil)
            static let store = MemoryStore()
            func encode(to encoder: any Encoder) throws {
                if n > 0 {
                    flushAllStores([Self.store])
                    Self.storage.withLock { $0 }?.flush()
                }
                var container = encoder.singleValueContainer()
                try container.encode(n)
            }
            init(n: Int) { self.n = n }
            init(from decoder: any Decoder) throws { n = try decoder.singleValueContainer().decode(Int.self) }
        }
        let store = Loud.store
        let loud = WLStorage(key: "loud", defaultValue: Loud(n: 0), flushInterval: nil, store: store)
        let quiet = WLStorage(key: "quiet", defaultValue: 0, flushInterval: nil, store: store)
        Loud.storage.withLock { $0 = loud }
        defer {
            let storage = Loud.storage.withLock { target in
                defer { target = nil }
                return target
            }
            _ = storage
        }
        loud.wrappedValue = Loud(n: 1)
        quiet.wrappedValue = 2
        #expect(finishes(within: 60) { flushAllStores([store]) })
        #expect(store.stored("loud") == "1")
        #expect(store.stored("quiet") == "2")
    }
}
