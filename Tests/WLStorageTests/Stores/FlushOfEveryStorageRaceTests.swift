// Flushes of every storage racing sets, updates, another program's writes and the release of storages: what each
// flush takes in a batch on condition is written once, onto what the others stored, and nothing is kept or lost.
import Dispatch
import Foundation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput) struct FlushOfEveryStorageRaceTests {
    struct Job: Codable, Sendable, Equatable {
        var set = 0
        var count = 0
        var other = 0
    }

    /// Decodes what `store` holds under `key`.
    private func stored(_ key: String, in store: MemoryStore) throws -> Job {
        try JSONDecoder().decode(Job.self, from: Data(try #require(store.stored(key)).utf8))
    }

    /// Two threads flush every storage of a store over and over beside sets, updates and another program's writes (see
    /// ``FlushOfEveryStorageRace``).
    @Test func twoFlushesOfEveryStorageAtOnceBesideSetsAndUpdatesKeepEveryChange() throws {
        let store = MemoryStore()
        try FlushOfEveryStorageRace.twoFlushesAtOnceBesideSetsAndUpdatesKeepEveryChange(
            store: store, outside: MemoryStore(replicaOf: store), keys: (0..<24).map { String(format: "job%02d", $0) },
            rounds: 150)
    }

    /// Storages whose objects are in a batch on condition are released while it is written: their last references
    /// dropped by another thread, and by their own `onChange` handlers as another program's change they take from the
    /// write on their own after a refusal is delivered. Every change is written, onto the other program's, no flush
    /// hangs, and every cell goes.
    @Test func storagesReleasedWhileTheirObjectsAreInABatchAreWrittenAndLetGo() throws {
        let store = MemoryStore()
        let keys = (0..<20).map { String(format: "job%02d", $0) }
        for key in keys { store.writeFromOutside(key, json: #"{"count":0,"other":0,"set":0}"#) }
        let held = keys.map { _ in HeldReference<WLStorage<Job>>() }
        let subscriptions = keys.map { _ in HeldReference<WLStorageSubscription>() }
        let cells = Lock<[Int: WeakJobCell]>([:])
        for (index, key) in keys.enumerated() {
            let storage = WLStorage(key: key, defaultValue: Job(), flushInterval: nil, store: store)
            cells.withLock { $0[index] = WeakJobCell(storage.cell) }
            held[index].hold(storage)
        }
        #expect(
            eventually { keys.indices.allSatisfy { held[$0].current?.cell.state.withLock { !$0.isBusy } ?? false } })
        for (index, key) in keys.enumerated() {
            let storage = try #require(held[index].current)
            storage.wrappedValue.set = index + 1
            if index % 2 == 0 {
                // Refused in the batch: the write on its own takes `other` and tells the handler, which lets go.
                store.writeUnreported(key, json: #"{"count":0,"other":\#(index + 100),"set":0}"#)
                let reference = held[index]
                let subscription = storage.onChange(queue: nil) { value in
                    if value.other == index + 100 { _ = reference.take() }
                }
                subscriptions[index].hold(subscription)
            }
        }
        store.afterConditionalBatch {
            // The odd ones, written in the batch: released by another thread as it returns.
            startThread { for index in keys.indices where index % 2 == 1 { _ = held[index].take() } }
        }
        #expect(finishes(within: 120) { flushAllStores([store]) }, "a flush of every storage hangs")
        for (index, key) in keys.enumerated() {
            let expected = Job(set: index + 1, other: index % 2 == 0 ? index + 100 : 0)
            #expect(try stored(key, in: store) == expected, "\(key)")
            if index % 2 == 0 {
                #expect(eventually { held[index].current == nil }, "\(key): the handler never let its storage go")
            }
            #expect(held[index].current == nil, "\(key)")
        }
        for subscription in subscriptions { _ = subscription.take() }
        #expect(
            eventually { cells.withLock { $0.values.allSatisfy { $0.cell == nil } } },
            "cells outlive their storages")
        #expect(eventually { store.feedCount == 0 })
    }
}

/// A cell held weakly.
private struct WeakJobCell: @unchecked Sendable {
    weak var cell: StorageCell<FlushOfEveryStorageRaceTests.Job>?
    init(_ cell: StorageCell<FlushOfEveryStorageRaceTests.Job>) { self.cell = cell }
}
