import Dispatch
import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// A carried change that arrives while the replica has a change of its own: the local change is the newer one, and is
/// kept and written; an update running meanwhile runs again on the carried value.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresCarriedChangeLocalChangeTests {
    private static func store(_ url: String, _ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10))
    }

    private static func row(_ admin: PostgresConnection, _ namespace: String, _ key: String) throws -> String? {
        try sqlValue(
            admin, "SELECT convert_from(value, 'UTF8') FROM wlstorage WHERE namespace = $1 AND key = $2",
            [namespace, key])
    }

    private static func sealedRow(_ admin: PostgresConnection, _ namespace: String, _ key: String) throws -> String? {
        try sqlValue(
            admin, "SELECT encode(value, 'hex') FROM wlstorage WHERE namespace = $1 AND key = $2", [namespace, key])
    }

    /// Writes `value` to `key` through `writer`, then to a marker key, and waits until the replica's marker storage
    /// shows it: the carried change of `key`, sent before, has been handled by then.
    private static func writeAndWait(
        _ writer: WLStoragePostgresStore, _ key: String, _ value: Int, marker: WLStorage<Int>, round: Int
    ) throws -> Bool {
        try writer.write(key: key, data: bytes("\(value)"))
        try writer.write(key: "marker", data: bytes("\(round)"))
        return eventually(timeout: 30) { marker.wrappedValue == round }
    }

    @Test func aLocalChangePendingWhenACarriedChangeArrivesIsKeptAndWritten() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let admin = try adminConnection(cluster.url)
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replicaStore = try Self.store(cluster.url, namespace)
        let replica = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: replicaStore)
        let marker = WLStorage(key: "marker", defaultValue: 0, flushInterval: nil, store: replicaStore)
        #expect(replica.wrappedValue == 1)
        // Several rounds, so that the replica knows the row's version and a carried change is adopted, not read.
        for round in 1...3 {
            #expect(try Self.writeAndWait(writer, "k", 10 + round, marker: marker, round: round))
        }
        #expect(replica.wrappedValue == 13)
        replica.wrappedValue = 99
        #expect(try Self.writeAndWait(writer, "k", 14, marker: marker, round: 4))
        #expect(replica.wrappedValue == 99)
        #expect(replica.hasPendingChanges)
        replica.flush()
        #expect(replica.lastError == nil)
        #expect(try Self.row(admin, namespace, "k") == "99")
    }

    @Test func anUpdateRunningWhenACarriedChangeArrivesRunsAgainOnTheCarriedValue() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let admin = try adminConnection(cluster.url)
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replicaStore = try Self.store(cluster.url, namespace)
        let replica = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: replicaStore)
        let marker = WLStorage(key: "marker", defaultValue: 0, flushInterval: nil, store: replicaStore)
        for round in 1...3 {
            #expect(try Self.writeAndWait(writer, "k", 10 + round, marker: marker, round: round))
        }
        #expect(replica.wrappedValue == 13)
        let runs = Lock<[Int]>([])
        replica.update { value in
            runs.withLock { $0.append(value) }
            if runs.withLock({ $0.count }) == 1 {
                // The first run: another program's write comes, and is carried, before it ends.
                _ = try? Self.writeAndWait(writer, "k", 100, marker: marker, round: 4)
                _ = eventually(timeout: 30) { replica.wrappedValue == 100 }
            }
            value += 1
        }
        #expect(runs.withLock { $0 } == [13, 100])
        #expect(replica.wrappedValue == 101)
        replica.flush()
        #expect(try Self.row(admin, namespace, "k") == "101")
    }

    /// An encrypted store over an encrypted store over PostgreSQL passes the carried changes through both layers: a
    /// storage of it follows another program's writes, opened twice, and its own change is written, sealed twice.
    @Test func aStorageOfANestedEncryptedStoreFollowsCarriedChangesAndWritesItsOwn() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let (inner, outer) = (try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random())
        let nested = { try Self.store(cluster.url, namespace).encrypted(with: inner).encrypted(with: outer) }
        let writer = try nested()
        try writer.write(key: "s", data: bytes(#""first""#))
        let replicaStore = try Self.store(cluster.url, namespace)
        let marker = WLStorage(key: "marker", defaultValue: 0, flushInterval: nil, store: replicaStore)
        let replica = WLStorage(
            key: "s", defaultValue: "default", flushInterval: 0,
            store: replicaStore.encrypted(with: inner).encrypted(with: outer))
        #expect(replica.wrappedValue == "first")
        for round in 1...3 {
            try writer.write(key: "s", data: bytes(#""value \#(round)""#))
            try Self.store(cluster.url, namespace).write(key: "marker", data: bytes("\(round)"))
            #expect(eventually(timeout: 30) { marker.wrappedValue == round })
            #expect(
                eventually(timeout: 30) { replica.wrappedValue == "value \(round)" }, "holds \(replica.wrappedValue)")
        }
        replica.wrappedValue = "the replica's"
        replica.flush()
        #expect(replica.lastError == nil)
        #expect(try writer.read(key: "s").map { String(decoding: $0, as: UTF8.self) } == #""the replica's""#)
    }

    @Test func anEncryptedReplicaWithAnotherKeyNeitherAdoptsNorOverwritesCarriedChanges() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let admin = try adminConnection(cluster.url)
        let rightKey = try WLStorageEncryptionKey.random()
        let writer = WLStorage(
            key: "s", defaultValue: "", flushInterval: 0,
            store: try Self.store(cluster.url, namespace).encrypted(with: rightKey))
        writer.wrappedValue = "first"
        writer.flush()
        let replicaStore = try Self.store(cluster.url, namespace)
        let marker = WLStorage(key: "marker", defaultValue: 0, flushInterval: nil, store: replicaStore)
        let replica = WLStorage(
            key: "s", defaultValue: "default", flushInterval: 0,
            store: replicaStore.encrypted(with: try WLStorageEncryptionKey.random()))
        #expect(replica.wrappedValue == "default")
        #expect(replica.lastError != nil)
        let sealed = try Self.sealedRow(admin, namespace, "s")
        for round in 1...3 {
            writer.wrappedValue = "value \(round)"
            writer.flush()
            try Self.store(cluster.url, namespace).write(key: "marker", data: bytes("\(round)"))
            #expect(eventually(timeout: 30) { marker.wrappedValue == round })
            #expect(replica.wrappedValue == "default")
        }
        #expect(replica.lastError != nil)
        #expect(try Self.sealedRow(admin, namespace, "s") != sealed)
        // What the replica could not open, it did not replace: the writer's latest value is still there.
        let check = WLStorage(
            key: "s", defaultValue: "", flushInterval: 0,
            store: try Self.store(cluster.url, namespace).encrypted(with: rightKey))
        #expect(check.wrappedValue == "value 3")
    }
}
