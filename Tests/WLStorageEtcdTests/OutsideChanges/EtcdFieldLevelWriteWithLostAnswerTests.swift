import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A change written onto an etcd key on condition of the bytes read, whose answer is lost while another program writes
/// the key: the key's history tells whether the write was carried out (a write fenced at a revision can only be the
/// key's first after it), so a write carried out is not made again over another program's newer change of its field,
/// and one never carried out is made onto what the key holds. Against the shared single-member server; answers and
/// requests are cut by a relay in front of it.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdFieldLevelWriteWithLostAnswerTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    /// A storage of `{"a":1,"b":1}` through the relay sets `a = 2`; its write is cut (`cut`) while another program
    /// stores `outside`; after two flushes the key and the storage hold `expected`, with nothing pending.
    private func expectRetry(
        cut: TransactionCuttingRelay.Cut, outside: String, toEndAs expected: Pair, namespace: String
    ) throws {
        let server = try EtcdServer.shared()
        let relay = try TransactionCuttingRelay(to: server.clientPort)
        defer { relay.stop() }
        let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
        let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
        try other.write(key: "pair", data: bytes(#"{"a":1,"b":1}"#))
        let storage = WLStorage(key: "pair", defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        relay.cutNextWrite(cut) { try? other.write(key: "pair", data: bytes(outside)) }
        storage.wrappedValue.a = 2
        storage.flush()
        storage.flush()
        #expect(relay.cutCount == 1, "the write was cut")
        let stored = try #require(try other.read(key: "pair"))
        #expect(
            try JSONDecoder().decode(Pair.self, from: stored) == expected, "\(String(decoding: stored, as: UTF8.self))")
        #expect(eventuallyHolds(storage, expected))
        #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
    }

    /// The write was carried out, and another program set the same field after it: that value is newer, and stays.
    @Test func aWriteCarriedOutIsNotMadeAgainOverAnotherProgramsNewerChangeOfTheField() async throws {
        try await onItsOwnThread {
            try expectRetry(
                cut: .answer, outside: #"{"a":3,"b":1}"#, toEndAs: Pair(a: 3, b: 1), namespace: uniqueNamespace())
        }
    }

    /// The write was carried out, and another program changed another field after it: both changes stay.
    @Test func aWriteCarriedOutKeepsAnotherProgramsChangeOfAnotherField() async throws {
        try await onItsOwnThread {
            try expectRetry(
                cut: .answer, outside: #"{"a":2,"b":5}"#, toEndAs: Pair(a: 2, b: 5), namespace: uniqueNamespace())
        }
    }

    /// The write never reached etcd, and another program set the same field meanwhile: the retry is the last write of
    /// it, and the other program's change of another field stays.
    @Test func aWriteNeverCarriedOutIsMadeOntoWhatTheKeyHolds() async throws {
        try await onItsOwnThread {
            try expectRetry(
                cut: .request, outside: #"{"a":3,"b":5}"#, toEndAs: Pair(a: 2, b: 5), namespace: uniqueNamespace())
        }
    }
    /// The write goes to an endpoint that delivers it late, after its caller gave up on its answer and the key's
    /// history, read through another endpoint, told of no write since: the write is carried out once, and not made
    /// again over another program's newer change of the field.
    @Test func aWriteDeliveredLateIsNotMadeAgainOverAnotherProgramsNewerChangeOfTheField() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let slow = try TCPProxy(to: server.clientPort)
            defer { slow.stop() }
            let store = try WLStorageEtcdStore(
                endpoints: [slow.endpoint, server.endpoint], namespace: namespace, timeout: .seconds(2))
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            try other.write(key: "pair", data: bytes(#"{"a":1,"b":1}"#))
            let storage = WLStorage(key: "pair", defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
            try #require(storage.wrappedValue == Pair(a: 1, b: 1))
            // The first endpoint, which answered last, now delivers everything 6 s late.
            slow.cutAll()
            slow.delay(.seconds(6))
            storage.wrappedValue.a = 2
            storage.flush()
            // The write is carried out (the late one, or another sent after it); then another program sets the field.
            try #require(
                eventually(timeout: 120) {
                    (try? rawEntry(in: server, namespace: namespace, key: "pair"))??.value == bytes(#"{"a":2,"b":1}"#)
                }, "the write was not carried out")
            try other.write(key: "pair", data: bytes(#"{"a":3,"b":1}"#))
            storage.flush()
            try #require(eventually(timeout: 120) { slow.chunksInFlight == 0 }, "the slow endpoint kept chunks")
            let stored = try #require(try other.read(key: "pair"))
            #expect(
                try JSONDecoder().decode(Pair.self, from: stored) == Pair(a: 3, b: 1),
                "\(String(decoding: stored, as: UTF8.self))")
            #expect(eventuallyHolds(storage, Pair(a: 3, b: 1)))
            #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
        }
    }
}
