import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// The etcd keys removals write, `wlstorage-removals/<namespace>/<bucket of the key>`, which writes where nothing may be
/// stored compare (so that one delivered late does not put back a key removed since).
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdRemovalsKeyTests {
    /// The `mod_revision` of the etcd key `etcdKey`, read with the raw API; `nil` when there is none.
    private func rawRevision(in server: EtcdServer, of etcdKey: String) throws -> Int64? {
        let answer = try server.post(server.endpoint, "v3/kv/range", ["key": Data(etcdKey.utf8).base64EncodedString()])
        guard let found = (answer["kvs"] as? [[String: Any]])?.first else { return nil }
        return (found["mod_revision"] as? String).flatMap { Int64($0) }
    }

    /// A removal writes its namespace's removals key of its key's bucket, not that of a namespace its name is the start
    /// of; neither `keys()` nor `entries()` names it.
    @Test func aRemovalWritesItsNamespacesRemovalsKeyWhichNoListingNames() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let longer = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace + "-longer")
            try longer.write(key: "k", data: bytes("1"))
            try store.write(key: "a", data: bytes("1"))
            try store.write(key: "b", data: bytes("1"))
            #expect(try rawRevision(in: server, of: removalsKey(namespace: namespace, of: "a")) == nil)

            try store.remove(key: "a")
            let removed = try #require(try rawRevision(in: server, of: removalsKey(namespace: namespace, of: "a")))
            let kept = try #require(try rawEntry(in: server, namespace: namespace, key: "b"))
            #expect(kept.revision < removed)
            #expect(try rawRevision(in: server, of: removalsKey(namespace: namespace + "-longer", of: "a")) == nil)
            #expect(try store.keys() == ["b"])
            #expect(try store.entries().map(\.key) == ["b"])
            #expect(try longer.keys() == ["k"])
            // A removal on condition too.
            #expect(try store.remove(key: "b", ifItHolds: bytes("1")))
            let again = try #require(try rawRevision(in: server, of: removalsKey(namespace: namespace, of: "b")))
            #expect(again > removed)
            #expect(try store.keys() == [])
            #expect(try store.entries() == [])
        }
    }

    /// A store whose latest revision is older than a removal (of another key of the same bucket) sends each write where
    /// nothing may be stored fenced at it: the removals key refuses it, as the fence refuses a write of a key written
    /// since, and it goes again with the revision of that answer, and is stored.
    @Test func aRemovalAfterTheStoresLatestRevisionRefusesNoWriteWhereNothingIsStoredForGood() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            #expect(try store.read(key: "k") == nil)
            /// Another program writes and removes a key of the namespace in the bucket of `key`, after the store's latest
            /// revision.
            func removal(beside key: String) throws {
                let removed = try #require(
                    (0..<10_000).lazy.map { "removed-\($0)" }.first {
                        removalsBucket(of: $0) == removalsBucket(of: key)
                    })
                try other.write(key: removed, data: bytes("1"))
                try other.remove(key: removed)
            }

            try removal(beside: "created")
            #expect(try store.write(key: "created", data: bytes("1"), ifItHolds: nil))
            try removal(beside: "made")
            #expect(try store.create(key: "made", data: bytes("1")))
            try removal(beside: "batched")
            #expect(
                try store.write([WLStorageStoreWrite(key: "batched", data: bytes("1"))], ifTheyHold: [nil]) == [true])
            try removal(beside: "put")
            try store.write(key: "put", data: bytes("1"))
            try removal(beside: "put-1")
            try store.write([
                WLStorageStoreWrite(key: "put-1", data: bytes("1")), .init(key: "put-2", data: bytes("1")),
            ])
            try removal(beside: "updated")
            let update = try store.write(key: "updated", data: bytes("1"), ifVersion: nil, tag: .init(text: "t"))
            guard case .stored = update else {
                Issue.record("the update's write was not stored: \(update)")
                return
            }
            let keys = ["batched", "created", "made", "put", "put-1", "put-2", "updated"]
            #expect(try other.keys() == keys)
            #expect(try other.read(keys: keys) == keys.map { _ in bytes("1") })
        }
    }
}
