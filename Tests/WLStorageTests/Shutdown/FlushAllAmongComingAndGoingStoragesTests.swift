// A flush of every storage, made again and again while storages of every kind are opened, set and let go of on other
// threads, writes every set and keeps no cell alive.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// The cells a run made, held weakly, to tell that none outlives its storages.
private final class MadeCells: Sendable {
    private final class Weak: Sendable {
        weak let cell: StorageCell<Int>?
        init(_ cell: StorageCell<Int>) { self.cell = cell }
    }

    private let cells = Lock<[Weak]>([])

    func add(_ cell: StorageCell<Int>) { cells.withLock { $0.append(Weak(cell)) } }

    var live: Int { cells.withLock { $0.filter { $0.cell != nil }.count } }

    func contains(_ cell: any RegisteredCell) -> Bool { cells.withLock { $0.contains { $0.cell === cell } } }
}

@Suite(.capturingOutput) struct FlushAllAmongComingAndGoingStoragesTests {
    /// Threads open storages of a file, of a store's key and of a custom backer (each thread keys of its own, each
    /// storage of a custom backer a backer of its own), set them, and let them go at once or after their next set;
    /// another thread flushes every storage meanwhile. Each key ends with its last set, each custom backer with its
    /// storage's, and every cell goes.
    @Test func everySetIsWrittenAndNoCellOutlivesItsStorages() throws {
        try withTemporaryDirectory { directory in
            let store = MemoryStore()
            let threads = 3
            let rounds = 150
            // A custom backer's storages do not share a cell: each storage has a backer of its own.
            let backers = (0..<threads).map { thread in
                (0..<rounds).map { RecordingBacker<Int>(key: "custom\(thread)-\($0)") }
            }
            let made = MadeCells()
            let done = Atomic<Int>(0)
            let group = DispatchGroup()
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                // Every live cell of the process is looked at, and this test's are flushed: a flush of the tests
                // running beside would write what they keep pending on purpose.
                while done.load(ordering: .acquiring) < threads {
                    ShutdownHandling.flushEverything(only: { made.contains($0) })
                }
            }
            for thread in 0..<threads {
                group.enter()
                Thread.detachNewThread {
                    defer {
                        done.add(1, ordering: .releasing)
                        group.leave()
                    }
                    var kept: [WLStorage<Int>] = []
                    for round in 0..<rounds {
                        let storages = [
                            WLStorage<Int>(
                                defaultValueClosure: { -1 }, flushInterval: nil,
                                backer: WLStorageDefaultBacker(key: "file\(thread)", directory: directory)),
                            WLStorage<Int>(key: "key\(thread)", defaultValue: -1, flushInterval: nil, store: store),
                            WLStorage<Int>(
                                defaultValueClosure: { -1 }, flushInterval: nil, backer: backers[thread][round]),
                        ]
                        for storage in storages {
                            made.add(storage.cell)
                            storage.wrappedValue = round
                        }
                        // Let go of at once, or after the next round's sets.
                        kept = round % 2 == 0 ? storages : []
                    }
                    _ = kept
                }
            }
            try #require(group.wait(timeout: .now() + 300) == .success, "the run did not finish in five minutes")

            for thread in 0..<threads {
                #expect(stored(Int.self, key: "file\(thread)", in: directory) == rounds - 1)
                #expect(store.stored("key\(thread)") == String(rounds - 1))
                #expect(backers[thread].map(\.stored) == (0..<rounds).map { $0 })
            }
            #expect(eventually(timeout: 30) { made.live == 0 }, "\(made.live) cells outlived their storages")
        }
    }
}
