import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A typed key's default is user code, made when another program removes the value: it may read or set storages,
/// its own key's included, without a deadlock and without a change being lost.
@Suite(.capturingOutput)
struct TypedKeyDefaultReentrancyTests {
    @Test func aDefaultThatReadsItsOwnKeyOnARemovalDoesNotDeadlock() throws {
        try withTemporaryDirectory { directory in
            let declared = Lock<WLStorageKey<Int>?>(nil)
            let seen = Lock<Int?>(nil)
            let key = WLStorageKey<Int>(
                "count",
                default: {
                    if let key = declared.withLock({ $0 }) {
                        let value = WLStorage(key).wrappedValue
                        seen.withLock { $0 = value }
                    }
                    return 0
                }(), flushInterval: nil, store: .directory(directory))
            declared.withLock { $0 = key }
            try WLStorageDirectoryStore.directory(directory).write(key: "count", data: Data("5".utf8))
            let count = WLStorage(key)
            #expect(count.wrappedValue == 5)
            try FileManager.default.removeItem(at: directory.appendingPathComponent("count"))
            #expect(eventually { count.wrappedValue == 0 })
            #expect(seen.withLock { $0 } == 5)
        }
    }

    @Test func aSetMadeByTheDefaultOfItsOwnKeyOnARemovalIsKeptAndWritten() throws {
        try withTemporaryDirectory { directory in
            let declared = Lock<WLStorageKey<Int>?>(nil)
            let key = WLStorageKey<Int>(
                "count",
                default: {
                    if let key = declared.withLock({ $0 }) { WLStorage(key).wrappedValue = 42 }
                    return 0
                }(), flushInterval: nil, store: .directory(directory))
            declared.withLock { $0 = key }
            try WLStorageDirectoryStore.directory(directory).write(key: "count", data: Data("5".utf8))
            let count = WLStorage(key)
            #expect(count.wrappedValue == 5)
            try FileManager.default.removeItem(at: directory.appendingPathComponent("count"))
            // The set came after the removal was seen: it is the newest change, and is kept.
            #expect(eventually { count.hasPendingChanges || count.wrappedValue != 5 })
            count.flush()
            #expect(count.wrappedValue == 42)
            #expect(stored(Int.self, key: "count", in: directory) == 42)
        }
    }
}
