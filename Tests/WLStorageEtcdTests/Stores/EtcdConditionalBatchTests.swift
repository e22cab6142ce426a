import Foundation
import Testing
import WLStorageEtcd
import WLStorageTestSupport

@testable import WLStorage

/// A batch of writes on condition in etcd, as a flush of every storage sends a store's objects: a transaction for many
/// keys, each write stored only while its key holds what it expects. Against the shared single-member server.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdConditionalBatchTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    /// A key another program changed is refused, and the batch's other writes, one of them where nothing was stored,
    /// are stored, together in one transaction: their keys end written at one revision.
    @Test func aKeyChangedByAnotherProgramIsRefusedWhileTheOthersOfItsTransactionAreStored() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let keys = (0..<10).map { "k\($0)" }
            try store.write(keys.map { WLStorageStoreWrite(key: $0, data: bytes("1")) })
            try other.write(key: "k5", data: bytes("other"))

            let batch = (keys + ["new"]).map { WLStorageStoreWrite(key: $0, data: bytes("2")) }
            let written = try store.write(batch, ifTheyHold: keys.map { _ in bytes("1") } + [nil])
            #expect(written == keys.map { $0 != "k5" } + [true])
            let entries = try other.entries()
            #expect(entries.first { $0.key == "k5" }?.value == bytes("other"))
            let stored = entries.filter { $0.key != "k5" }
            #expect(stored.map(\.key).sorted() == (keys + ["new"]).filter { $0 != "k5" }.sorted())
            #expect(stored.allSatisfy { $0.value == bytes("2") })
            #expect(Set(stored.map(\.revision)).count == 1, "one transaction: \(stored.map(\.revision))")
        }
    }

    /// A write too large for a request to etcd is refused, not sent, and the batch's others are stored: written on its
    /// own, it is reported as too large.
    @Test func aWriteTooLargeForATransactionIsRefusedWhileTheOthersAreStored() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [EtcdServer.shared().endpoint], namespace: namespace)
            let large = Data(repeating: UInt8(ascii: "x"), count: WLStorageEtcdStore.maximumRequestBytes)
            let batch = [
                WLStorageStoreWrite(key: "a", data: bytes("1")), WLStorageStoreWrite(key: "b", data: large),
                WLStorageStoreWrite(key: "c", data: bytes("1")),
            ]
            #expect(try store.write(batch, ifTheyHold: [nil, nil, nil]) == [true, false, true])
            #expect(try store.keys() == ["a", "c"])
            #expect(throws: WLStorageError.self) { try store.write(key: "b", data: large, ifItHolds: nil) }
        }
    }

    /// A flush of every storage of the store writes 300 objects read from etcd, each changed, in a batch on condition:
    /// three transactions (of 127 writes at most), not one each, so their keys end written at three revisions.
    @Test func aFlushOfEveryStorageWritesThreeHundredObjectsInThreeTransactions() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let keys = (0..<300).map { String(format: "o%03d", $0) }
            try store.write(keys.map { WLStorageStoreWrite(key: $0, data: bytes(#"{"a":0,"b":0}"#)) })
            // The store's feed in place first: once its watch is made, it has every storage read its key again, which
            // leaves what it read seen (a change then goes on its own, onto it).
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let marker = WLStorage(key: "z-marker", defaultValue: 0, flushInterval: nil, store: store)
            try other.write(key: "z-marker", data: bytes("1"))
            try #require(eventuallyHolds(marker, 1))
            try other.write(key: "z-marker", data: bytes("2"))
            try #require(eventuallyHolds(marker, 2), "the feed told of another program's write")
            let storages = keys.map {
                WLStorage(key: $0, defaultValue: Pair(a: -1, b: -1), flushInterval: nil, store: store)
            }
            try #require(storages.allSatisfy { $0.wrappedValue == Pair(a: 0, b: 0) })
            // A busy cell would be flushed on its own.
            try #require(eventually(timeout: 60) { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
            for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }

            // `WLStorageSystem.flushAll()`, of this store's storages only: the other tests' are left to them.
            ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
            #expect(storages.allSatisfy { !$0.hasPendingChanges }, "\(storages.compactMap(\.lastError).prefix(3))")
            let objects = try store.entries().filter { $0.key != "z-marker" }
            try #require(objects.map(\.key) == keys, "\(objects.count) objects stored")
            for (index, object) in objects.enumerated() {
                #expect(
                    try JSONDecoder().decode(Pair.self, from: object.value) == Pair(a: index + 1, b: 0), "\(object.key)"
                )
            }
            let revisions = Dictionary(grouping: objects, by: \.revision).sorted { $0.key < $1.key }
            let written = revisions.map { "\($0.value.count) at \($0.key), from \($0.value[0].key)" }
            #expect(revisions.count == 3, "the objects written: \(written.prefix(10))")
        }
    }

    /// The batch's transaction is cut, its request never forwarded or its answer lost: what its keys hold tells (none
    /// written since: it is sent again; all holding its bytes at one revision: it was carried out), and every write is
    /// reported stored, made once, in one transaction.
    @Test(arguments: [TransactionCuttingRelay.Cut.request, .answer])
    func aBatchWhoseTransactionIsCutIsJudgedByWhatItsKeysHold(cut: TransactionCuttingRelay.Cut) async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let keys = (0..<20).map { "k\($0)" }
            try other.write(keys.map { WLStorageStoreWrite(key: $0, data: bytes("1")) })

            relay.cutNextWrite(cut)
            let written = try store.write(
                keys.map { WLStorageStoreWrite(key: $0, data: bytes("2")) }, ifTheyHold: keys.map { _ in bytes("1") })
            #expect(written == keys.map { _ in true })
            #expect(relay.cutCount == 1, "the transaction was cut")
            let entries = try other.entries()
            #expect(entries.map(\.key).sorted() == keys.sorted())
            #expect(entries.allSatisfy { $0.value == bytes("2") })
            #expect(Set(entries.map(\.revision)).count == 1, "one transaction: \(entries.map(\.revision))")
        }
    }
}
