import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A write that reaches etcd late, after its caller gave up on it and wrote newer values through another endpoint (a
/// network that holds a request for seconds, then delivers it), never takes the key back to an older value.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdLateWriteTests {
    @Test func aWriteDeliveredAfterNewerOnesNeverTakesTheKeyBack() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let slow = try TCPProxy(to: server.clientPort)
            let other = try TCPProxy(to: server.clientPort)
            defer {
                slow.stop()
                other.stop()
            }
            // No storage: nothing but these calls goes through the proxies.
            let store = try WLStorageEtcdStore(
                endpoints: [slow.endpoint, other.endpoint], namespace: namespace, timeout: .seconds(2))
            try store.write(key: "flag", data: bytes("true"))
            try store.write(key: "note", data: bytes("1"))

            // The first endpoint, which answered last, now delivers everything 8 s late.
            slow.delay(.seconds(8))
            // A conditional write goes to it, and its answer does not come in time; the key's history, read through the
            // other endpoint, tells of no write since: the same write is sent there, fenced alike, and stored. Then the
            // flag goes back to true (the late write's condition holds again).
            #expect(try store.write(key: "flag", data: bytes("false"), ifItHolds: bytes("true")))
            #expect(try store.read(key: "flag") == bytes("false"))
            #expect(try store.write(key: "flag", data: bytes("true"), ifItHolds: bytes("false")))

            // A plain write through the slow endpoint, sent again to the other one, then a newer value.
            let slowFirst = try WLStorageEtcdStore(
                endpoints: [slow.endpoint, other.endpoint], namespace: namespace, timeout: .seconds(2))
            try slowFirst.write(key: "note", data: bytes("2"))
            try store.write(key: "note", data: bytes("3"))
            #expect(try store.read(key: "note") == bytes("3"))
            // A batch (a flush of every storage, the flush at exit) the same way.
            let batchFirst = try WLStorageEtcdStore(
                endpoints: [slow.endpoint, other.endpoint], namespace: namespace, timeout: .seconds(2))
            try batchFirst.write([
                WLStorageStoreWrite(key: "batched", data: bytes("1")),
                WLStorageStoreWrite(key: "batched2", data: bytes("1")),
            ])
            try store.write(key: "batched", data: bytes("2"))

            // Everything held is delivered, and answered.
            try #require(eventually(timeout: 120) { slow.chunksInFlight == 0 }, "the slow endpoint kept chunks")
            let flag = try rawEntry(in: server, namespace: namespace, key: "flag")?.value
            #expect(flag == bytes("true"), "a late write took the flag back to \(String(describing: flag))")
            let note = try rawEntry(in: server, namespace: namespace, key: "note")?.value
            #expect(note == bytes("3"), "a late write took the note back to \(String(describing: note))")
            let batched = try rawEntry(in: server, namespace: namespace, key: "batched")?.value
            #expect(batched == bytes("2"), "a late batch took the key back to \(String(describing: batched))")
        }
    }

    /// A batch of two keys goes to an endpoint that delivers everything late, and its caller gives up on it (not known
    /// whether stored). Only its last key is written since, elsewhere. The batch's first tries (the range from its first
    /// key to its last, fenced as one), delivered then, do nothing: the range holds its last key.
    @Test func aBatchDeliveredLateAfterItsLastKeyWasWrittenDoesNothing() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let slow = try TCPProxy(to: server.clientPort)
            defer { slow.stop() }
            let store = try WLStorageEtcdStore(
                endpoints: [server.endpoint], namespace: namespace, timeout: .seconds(2))
            let late = try WLStorageEtcdStore(endpoints: [slow.endpoint], namespace: namespace, timeout: .seconds(2))
            // The late store hears the cluster's revision before the endpoint delivers late; the batch goes on a
            // connection made then.
            #expect(try late.read(key: "a") == nil)
            slow.cutAll()
            slow.delay(.seconds(6))
            #expect(throws: WLStorageError.self) {
                try late.write([
                    WLStorageStoreWrite(key: "a", data: bytes("late")),
                    WLStorageStoreWrite(key: "b", data: bytes("late")),
                ])
            }
            try store.write(key: "b", data: bytes("newer"))

            try #require(eventually(timeout: 120) { slow.chunksInFlight == 0 }, "the slow endpoint kept chunks")
            let last = try rawEntry(in: server, namespace: namespace, key: "b")?.value
            #expect(last == bytes("newer"), "a late batch took the key back to \(String(describing: last))")
            #expect(try rawEntry(in: server, namespace: namespace, key: "a") == nil)
        }
    }
}
