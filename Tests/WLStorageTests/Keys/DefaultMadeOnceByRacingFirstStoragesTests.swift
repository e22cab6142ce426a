// Threads that create the first storages of a key at once, with nothing stored, share one default: it is made once
// while storages of the key live, however many threads race to open the key.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A default that takes a moment to make, and counts how often it was made.
private final class CountingDefault: Sendable {
    private let count = Atomic<Int>(0)

    func make() -> Int {
        count.add(1, ordering: .sequentiallyConsistent)
        // A slow default: the other threads reach the key while it is made.
        usleep(50_000)
        return 7
    }

    var made: Int { count.load(ordering: .sequentiallyConsistent) }
}

@Suite(.capturingOutput)
struct DefaultMadeOnceByRacingFirstStoragesTests {
    static let threads = 8

    /// Where the key lives: a directory, or a store of another kind.
    enum Place: CaseIterable, Sendable {
        case directory, memoryStore
    }

    /// Starts `threads` threads together, each creating a storage with `make`; returns the storages, all alive.
    private static func race(_ make: @escaping @Sendable () -> WLStorage<Int>) -> [WLStorage<Int>] {
        let storages = Lock<[WLStorage<Int>]>([])
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for _ in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                start.wait()
                let storage = make()
                storages.withLock { $0.append(storage) }
                done.leave()
            }
        }
        for _ in 0..<threads { start.signal() }
        #expect(done.wait(timeout: .now() + 60) == .success, "a thread creating a storage did not finish")
        return storages.withLock { $0 }
    }

    private static func withStore(_ place: Place, _ body: (any WLStorageStore) throws -> Void) throws {
        switch place {
        case .directory:
            try withTemporaryDirectory { try body(WLStorageDirectoryStore.directory($0)) }
        case .memoryStore:
            try body(MemoryStore())
        }
    }

    @Test(arguments: Place.allCases)
    func aTypedKeysDefaultIsMadeOnce(place: Place) throws {
        try Self.withStore(place) { store in
            let counting = CountingDefault()
            let key = WLStorageKey<Int>("count", default: counting.make(), flushInterval: nil, store: store)
            let storages = Self.race { WLStorage(key) }
            #expect(storages.count == Self.threads)
            #expect(storages.allSatisfy { $0.wrappedValue == 7 })
            #expect(counting.made == 1)
            storages.first?.flush()
        }
    }

    @Test(arguments: Place.allCases)
    func aDefaultValueClosureIsCalledOnce(place: Place) throws {
        try Self.withStore(place) { store in
            let counting = CountingDefault()
            let storages = Self.race {
                WLStorage(key: "count", defaultValueClosure: { counting.make() }, flushInterval: nil, store: store)
            }
            #expect(storages.count == Self.threads)
            #expect(storages.allSatisfy { $0.wrappedValue == 7 })
            #expect(counting.made == 1)
            storages.first?.flush()
        }
    }
}
