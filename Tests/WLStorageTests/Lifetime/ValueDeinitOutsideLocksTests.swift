// Values whose `deinit` reads, sets and flushes their own storage are released outside every lock of the package.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

/// A value is released outside every lock: its `deinit` may read and set the very storage.
private final class Touchy: Codable, Sendable {
    static let target = Lock<WLStorage<Touchy>?>(nil)
    static let touched = Atomic<Int>(0)
    let n: Int
    init(_ n: Int) { self.n = n }
    deinit {
        guard Self.touched.add(1, ordering: .relaxed).newValue < 50 else { return }
        let storage = Self.target.withLock { $0 }
        if let storage {
            _ = storage.wrappedValue
            _ = storage.hasPendingChanges
            if n == 1 { storage.wrappedValue = Touchy(-1) }
            storage.flush()
        }
    }
}

@Suite(.capturingOutput, .serialized) struct ValueDeinitOutsideLocksTests {
    @Test func valuesWhoseDeinitTouchesTheStorageAreReleasedOutsideTheLock() {
        let store = MemoryStore()
        store.writeFromOutside("t", json: #"{"n":5}"#)
        let storage = WLStorage(key: "t", defaultValue: Touchy(0), flushInterval: nil, store: store)
        Touchy.target.withLock { $0 = storage }
        // The value read stays with the backer (the base of a field merge); a value set is released at the next set.
        storage.wrappedValue = Touchy(1)
        defer {
            let storage = Touchy.target.withLock { target in
                defer { target = nil }
                return target
            }
            _ = storage
        }
        storage.wrappedValue = Touchy(2)  // releases the value set before, whose deinit sets the storage
        #expect(storage.wrappedValue.n == -1)
        storage.flush()
        #expect(store.stored("t") == #"{"n":-1}"#)
        store.writeFromOutside("t", json: #"{"n":3}"#)  // adopted: releases the value in memory
        #expect(eventually { storage.wrappedValue.n == 3 })
        store.removeFromOutside("t")  // back to the default: releases the value in memory
        #expect(eventually { storage.wrappedValue.n == 0 })
        #expect(Touchy.touched.load(ordering: .relaxed) > 0)
    }
}
