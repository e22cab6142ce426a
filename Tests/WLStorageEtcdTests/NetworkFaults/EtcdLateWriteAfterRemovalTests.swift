import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A write of one key whose transaction reaches etcd late, after its caller gave up on it (its answer did not come in
/// time), the key was written otherwise and then removed: the key, where nothing is stored again, stays removed.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdLateWriteAfterRemovalTests {
    /// A write on condition that nothing is stored: the key's creation revision and the fence both hold again once the
    /// key is removed; the removal, made after the revision the write was fenced at, refuses it.
    @Test func aLateWriteWhereNothingWasStoredDoesNotPutBackAKeyRemovedSince() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let slow = try TCPProxy(to: server.clientPort)
            defer { slow.stop() }
            let store = try WLStorageEtcdStore(endpoints: [slow.endpoint], namespace: namespace, timeout: .seconds(2))
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            #expect(try store.read(key: "k") == nil)

            // The write goes to an endpoint that delivers everything 8 s late: its outcome is unknown (the key's
            // history, read through that endpoint too, does not tell in time).
            slow.delay(.seconds(8))
            #expect(throws: WLStorageError.self) { try store.write(key: "k", data: bytes("1"), ifItHolds: nil) }
            // The write is made otherwise, and the key is removed after it.
            #expect(try other.write(key: "k", data: bytes("1"), ifItHolds: nil))
            try other.remove(key: "k")
            #expect(try other.read(key: "k") == nil)

            // Everything held is delivered, and answered.
            try #require(eventually(timeout: 120) { slow.chunksInFlight == 0 }, "the slow endpoint kept chunks")
            let entry = try rawEntry(in: server, namespace: namespace, key: "k")
            #expect(entry == nil, "the late write stored \(String(describing: entry?.value)) again")
        }
    }

    /// A plain write and a batch's transaction: their fence holds for a key where nothing is stored; the removal, made
    /// after the revision they were fenced at, refuses them.
    @Test func aLatePlainWriteOrBatchDoesNotPutBackAKeyRemovedSince() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let slow = try TCPProxy(to: server.clientPort)
            defer { slow.stop() }
            let store = try WLStorageEtcdStore(endpoints: [slow.endpoint], namespace: namespace, timeout: .seconds(2))
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            #expect(try store.read(key: "k") == nil)

            // The store hears the cluster's revision before the endpoint delivers everything 8 s late; the write and the
            // batch go on connections made then (a plain write would go on the read's, kept open).
            slow.cutAll()
            slow.delay(.seconds(8))
            #expect(throws: WLStorageError.self) { try store.write(key: "k", data: bytes("1")) }
            #expect(throws: WLStorageError.self) {
                try store.write([
                    WLStorageStoreWrite(key: "a", data: bytes("1")), WLStorageStoreWrite(key: "b", data: bytes("1")),
                ])
            }
            // Each key is written otherwise, and removed after it.
            for key in ["k", "a", "b"] {
                try other.write(key: key, data: bytes("2"))
                try other.remove(key: key)
            }
            #expect(try other.keys() == [])

            try #require(eventually(timeout: 120) { slow.chunksInFlight == 0 }, "the slow endpoint kept chunks")
            for key in ["k", "a", "b"] {
                let entry = try rawEntry(in: server, namespace: namespace, key: key)
                #expect(entry == nil, "a late write stored \(String(describing: entry?.value)) again under \(key)")
            }
        }
    }

    /// An update's write where nothing was stored compares the key's creation revision with 0 and its tags' key's too:
    /// both hold again once the key is removed (its tags with it). The removal, made after the revision the update read
    /// the key at, refuses it.
    @Test func aLateUpdateWhereNothingWasStoredDoesNotPutBackAKeyRemovedSince() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            // The update's transaction is held while the key is written otherwise and removed, then carried out; its
            // answer is lost.
            relay.cutNextWrite(.late) {
                _ = try? other.write(key: "k", data: bytes("2"), ifItHolds: nil)
                try? other.remove(key: "k")
            }
            #expect(throws: WLStorageError.self) {
                _ = try store.write(key: "k", data: bytes("1"), ifVersion: nil, tag: WLStorageWriteTag(text: "late"))
            }
            #expect(relay.cutCount == 1, "the update's write was held")
            #expect(try other.read(key: "k") == nil, "the late update stored the key again")
        }
    }
}
