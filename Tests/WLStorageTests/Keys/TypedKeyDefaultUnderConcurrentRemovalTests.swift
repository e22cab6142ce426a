import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A typed key's default needed while many threads read and make storages of the key, and another program removes
/// and writes its file again and again: every read is the default or a written value, and the default is made once.
@Suite(.capturingOutput)
struct TypedKeyDefaultUnderConcurrentRemovalTests {
    @Test func manyThreadsReadingWhileAnotherProgramRemovesTheFileSeeOnlyKnownValuesAndOneDefault() throws {
        try withTemporaryDirectory { directory in
            let made = Atomic<Int>(0)
            let key = WLStorageKey<Int>(
                "count",
                default: {
                    made.add(1, ordering: .relaxed)
                    return -1
                }(), flushInterval: nil, store: .directory(directory))
            let file = directory.appendingPathComponent("count")
            try WLStorageDirectoryStore.directory(directory).write(key: "count", data: Data("0".utf8))
            let first = WLStorage(key)
            #expect(first.wrappedValue == 0)
            let done = Atomic<Bool>(false)
            let unexpected = Lock<[Int]>([])
            let openers = (0..<4).map { _ in
                startThread {
                    while !done.load(ordering: .relaxed) {
                        let storage = WLStorage(key)
                        let value = storage.wrappedValue
                        if value < -1 || value > 20 { unexpected.withLock { $0.append(value) } }
                    }
                }
            }
            for round in 1...20 {
                try FileManager.default.removeItem(at: file)
                _ = eventually(timeout: 30) { first.wrappedValue == -1 }
                try Data("\(round)".utf8).write(to: file, options: .atomic)
                _ = eventually(timeout: 30) { first.wrappedValue == round }
            }
            done.store(true, ordering: .relaxed)
            openers.forEach { $0.wait() }
            #expect(unexpected.withLock { $0 }.isEmpty)
            #expect(made.load(ordering: .relaxed) == 1)
            #expect(eventually { first.wrappedValue == 20 })
        }
    }
}
