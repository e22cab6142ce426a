import Foundation
import Synchronization
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// What a storage said was written stays written when the server dies in the middle of a flush (`SIGKILL`) and starts
/// again on its data directory; what was not written is written once it is back, and no value goes back in time.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdAcknowledgedWriteTests {
    @Test func everyAcknowledgedWriteSurvivesAServerKilledMidFlushAndNoValueGoesBack() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.started()
            defer { server.remove() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace, timeout: .seconds(2))
            let count = 300
            let storages = (0..<count).map { index in
                WLStorage(key: "k\(index)", defaultValue: 0, flushInterval: nil, store: store)
            }
            // Round 1, written before the kill: the value a key must not go back to.
            for storage in storages { storage.wrappedValue = 1 }
            for storage in storages { storage.flush() }
            #expect(storages.allSatisfy { !$0.hasPendingChanges })

            // Round 2, flushed one storage after the other while the server is killed and started again.
            for storage in storages { storage.wrappedValue = 2 }
            let acknowledged = Mutex<[Int]>([])
            let flushed = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                for (index, storage) in storages.enumerated() {
                    storage.flush()
                    if !storage.hasPendingChanges { acknowledged.withLock { $0.append(index) } }
                }
                flushed.signal()
            }
            try #require(
                eventually(timeout: 120) { acknowledged.withLock { $0.count } >= 30 }, "the flush did not start")
            server.stop()
            let killedAfter = acknowledged.withLock { $0.count }
            try server.start()
            #expect(flushed.wait(timeout: .now() + 300) == .success, "the flush did not end")
            let acknowledgedBeforeAll = acknowledged.withLock { $0 }
            #expect(killedAfter < count, "every write was acknowledged before the kill: nothing was in flight")

            // Every acknowledged write is in etcd, as the server came back with it.
            var missing: [Int] = []
            for index in acknowledgedBeforeAll
            where try rawEntry(in: server, namespace: namespace, key: "k\(index)")?.value != bytes("2") {
                missing.append(index)
            }
            #expect(missing.isEmpty, "acknowledged writes lost: keys \(missing)")

            // The others stay pending until written; then every key holds 2, in etcd and in its storage.
            #expect(
                eventually(timeout: 120) {
                    storages.filter(\.hasPendingChanges).forEach { $0.flush() }
                    return storages.allSatisfy { !$0.hasPendingChanges }
                }, "\(storages.filter(\.hasPendingChanges).count) values still pending")
            var wrong: [String] = []
            for index in 0..<count {
                let stored = try rawEntry(in: server, namespace: namespace, key: "k\(index)")?.value
                if stored != bytes("2") {
                    wrong.append("k\(index): \(stored.map { String(decoding: $0, as: UTF8.self) } ?? "nothing")")
                }
            }
            #expect(wrong.isEmpty, "etcd holds older values: \(wrong.prefix(10))")
            // The feed, made again after the restart, brings no storage back to an older value.
            #expect(
                eventually(timeout: 60) { store.changeFeedError == nil }
                    && storages.allSatisfy { $0.wrappedValue == 2 },
                "storages back in time: \(storages.indices.filter { storages[$0].wrappedValue != 2 }.prefix(10))")
        }
    }
}
