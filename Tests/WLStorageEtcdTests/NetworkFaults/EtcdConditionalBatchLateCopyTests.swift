import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A batch on condition whose transaction reaches etcd late, after its caller gave up on it (its answer did not come in
/// time, and its keys did not tell) and the write was made otherwise.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdConditionalBatchLateCopyTests {
    /// The write of a key where nothing is stored compares the key's creation revision with 0, and the fence compares
    /// the modification revisions of the keys from its first to its last: a key removed after the transaction was sent
    /// holds nothing again, and both hold. The namespace's removals' key, written by the removal after the revision the
    /// transaction was fenced at, refuses it: the key stays removed.
    @Test func aLateTransactionOfAKeyWhereNothingWasStoredDoesNotPutBackAKeyRemovedSince() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let slow = try TCPProxy(to: server.clientPort)
            defer { slow.stop() }
            let store = try WLStorageEtcdStore(endpoints: [slow.endpoint], namespace: namespace, timeout: .seconds(2))
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            #expect(try store.read(key: "k") == nil)

            // The batch's transaction goes to an endpoint that delivers everything 8 s late: its outcome is unknown.
            slow.delay(.seconds(8))
            #expect(throws: WLStorageError.self) {
                try store.write([WLStorageStoreWrite(key: "k", data: bytes("1"))], ifTheyHold: [nil])
            }
            // The write is made otherwise (a flush writes the object on its own), and the key is removed after it.
            #expect(try other.write(key: "k", data: bytes("1"), ifItHolds: nil))
            try other.remove(key: "k")
            #expect(try other.read(key: "k") == nil)

            // Everything held is delivered, and answered.
            try #require(eventually(timeout: 120) { slow.chunksInFlight == 0 }, "the slow endpoint kept chunks")
            let entry = try rawEntry(in: server, namespace: namespace, key: "k")
            #expect(entry == nil, "the late transaction stored \(String(describing: entry?.value)) again")
        }
    }
}
