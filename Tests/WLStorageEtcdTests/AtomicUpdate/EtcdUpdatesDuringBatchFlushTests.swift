import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

@testable import WLStorage

/// Updates of objects made while flushes of every storage write other changes of the same objects in batches on
/// condition.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdUpdatesDuringBatchFlushTests {
    struct Tally: Codable, Sendable, Equatable {
        var count = 0
        var note = 0
    }

    /// Two programs update the counts of 20 objects while one of them changes each object's note and flushes every
    /// storage, again and again: each count ends holding exactly the updates made, once each, and each note the last
    /// one set.
    @Test func updatesMixedWithFlushesOfEveryStorageCountOnceEach() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let stores = try [[server.endpoint], [server.otherSpelling]].map {
                try WLStorageEtcdStore(endpoints: $0, namespace: namespace, timeout: .seconds(10))
            }
            let keys = (0..<20).map { String(format: "t%02d", $0) }
            try stores[1].write(keys.map { WLStorageStoreWrite(key: $0, data: Data(#"{"count":0,"note":0}"#.utf8)) })
            let programs = stores.map { store in
                keys.map { WLStorage(key: $0, defaultValue: Tally(), flushInterval: nil, store: store) }
            }
            try #require(programs.allSatisfy { $0.allSatisfy { $0.wrappedValue == Tally() } })
            let rounds = 10
            let updating = programs.map { storages in
                startThread {
                    for _ in 0..<rounds {
                        for storage in storages { storage.update { $0.count += 1 } }
                    }
                }
            }
            let flushing = startThread {
                for round in 1...rounds {
                    // An update: `wrappedValue.note = round` would set the whole value read, over a count an update of
                    // the other thread made meanwhile (a compound set is not atomic; see Guarantees).
                    for storage in programs[0] { storage.update { $0.note = round } }
                    ShutdownHandling.flushEverything(only: { $0.storeKey?.store == stores[0].identity })
                }
            }
            for thread in updating + [flushing] { #expect(thread.wait(timeout: .now() + 300) == .success) }
            #expect(
                eventually(timeout: 60) {
                    ShutdownHandling.flushEverything(only: { $0.storeKey?.store == stores[0].identity })
                    return programs[0].allSatisfy { !$0.hasPendingChanges }
                }, "\(programs[0].compactMap(\.lastError).prefix(3))")
            for storage in programs.joined() {
                #expect(storage.lastError == nil, "\(storage.lastError?.message ?? "")")
            }

            for key in keys {
                let stored = try JSONDecoder().decode(Tally.self, from: try #require(try stores[1].read(key: key)))
                #expect(stored == Tally(count: 2 * rounds, note: rounds), "\(key)")
            }
        }
    }

    /// The batch on condition of a flush is cut (its request never forwarded, or its answer lost) while this program
    /// updates one of its objects from another thread, and another program another one: each update counts once, and
    /// the flushed notes are stored.
    @Test(arguments: [TransactionCuttingRelay.Cut.request, .answer])
    func updatesMadeWhileABatchOnConditionIsCutCountOnce(cut: TransactionCuttingRelay.Cut) async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace, timeout: .seconds(5))
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let keys = (0..<10).map { String(format: "t%02d", $0) }
            try other.write(keys.map { WLStorageStoreWrite(key: $0, data: Data(#"{"count":0,"note":0}"#.utf8)) })
            let storages = keys.map { WLStorage(key: $0, defaultValue: Tally(), flushInterval: nil, store: store) }
            let elsewhere = WLStorage(key: "t05", defaultValue: Tally(), flushInterval: nil, store: other)
            try #require(storages.allSatisfy { $0.wrappedValue == Tally() } && elsewhere.wrappedValue == Tally())
            try #require(eventually(timeout: 60) { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
            for storage in storages { storage.wrappedValue.note = 1 }

            let updated = Lock(false)
            relay.cutNextWrite(cut) {
                let updating = startThread { storages[2].update { $0.count += 1 } }
                elsewhere.update { $0.count += 1 }
                updated.withLock { $0 = updating.wait(timeout: .now() + 60) == .success }
            }
            ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
            #expect(relay.cutCount == 1, "the batch was cut")
            #expect(eventually(timeout: 60) { updated.withLock { $0 } }, "this program's update ended")
            #expect(
                eventually(timeout: 60) {
                    ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
                    return storages.allSatisfy { !$0.hasPendingChanges }
                }, "\(storages.compactMap(\.lastError).prefix(3))")
            for (index, key) in keys.enumerated() {
                let stored = try JSONDecoder().decode(Tally.self, from: try #require(try other.read(key: key)))
                #expect(stored == Tally(count: index == 2 || index == 5 ? 1 : 0, note: 1), "\(key)")
            }
        }
    }
}
