import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// An encrypted store over the etcd store: its feed carries the bytes sealed, as etcd holds them, and the replica that
/// has the key opens them; bytes sealed with another key change nothing it holds.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdEncryptedStoreTests {
    @Test func aReplicaOpensWhatTheFeedCarriesAndIgnoresBytesSealedWithAnotherKey() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let server = try EtcdServer.shared()
            let key = try WLStorageEncryptionKey.random()
            let replicaStore = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let writerStore = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let writer = WLStorage(
                key: "secret", defaultValue: 0, flushInterval: 0, store: writerStore.encrypted(with: key))
            writer.wrappedValue = 1
            writer.flush()
            let replica = WLStorage(
                key: "secret", defaultValue: 0, flushInterval: 0, store: replicaStore.encrypted(with: key))
            #expect(replica.wrappedValue == 1)
            let seen = Lock<[Int]>([])
            let subscription = replica.onChange(queue: nil) { value in seen.withLock { $0.append(value) } }
            defer { subscription.cancel() }

            for value in 2...4 {
                writer.wrappedValue = value
                writer.flush()
                #expect(eventuallyHolds(replica, value), "the replica holds \(replica.wrappedValue)")
            }
            // etcd holds the value sealed: its JSON is nowhere in the bytes.
            let stored = try #require(try writerStore.read(key: "secret"))
            #expect(!stored.isEmpty && stored != Data("4".utf8))

            // A program with another key writes the key: the replica cannot open it and keeps what it holds.
            let foreign = try WLStorageEtcdStore(
                endpoints: [server.endpoint, server.otherSpelling], namespace: namespace
            )
            .encrypted(with: try WLStorageEncryptionKey.random())
            try foreign.write(key: "secret", data: Data("666".utf8))
            // The next write with the right key, by a program without a storage, follows a version the replica could
            // not open: the key is read, and what it holds taken.
            try writerStore.encrypted(with: key).write(key: "secret", data: Data("5".utf8))
            #expect(eventuallyHolds(replica, 5), "the replica holds \(replica.wrappedValue)")
            #expect(!seen.withLock { $0 }.contains(666), "the replica took bytes sealed with another key")
            // The observer is told after the value is taken: on a slow machine (ThreadSanitizer), a moment after.
            #expect(eventually(timeout: 60) { seen.withLock { $0 }.last == 5 }, "\(seen.withLock { $0 })")
        }
    }
}
