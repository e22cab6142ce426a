import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// An encrypted store over the PostgreSQL store in a program that has the wrong key: it never replaces the value it
/// cannot open, by any path that writes (a set, an update, a flush, the flush of every storage), and says why.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresWrongKeyTests {
    /// The row's value and version, read past the store.
    private static func row(_ cluster: PostgresCluster, _ namespace: String, _ key: String) throws -> String? {
        let connection = try adminConnection(cluster.url)
        defer { connection.close() }
        return try sqlValue(
            connection,
            "SELECT encode(value, 'hex') || ' ' || version FROM wlstorage WHERE namespace = $1 AND key = $2",
            [namespace, key])
    }

    @Test func aProgramWithTheWrongKeyNeverOverwritesTheValueAndSaysWhy() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let rightStore = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let writer = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: rightStore.encrypted(with: key))
        writer.wrappedValue = "secret"
        writer.flush()
        let sealed = try #require(try Self.row(cluster, namespace, "token"))

        let wrongStore = try WLStoragePostgresStore(
            url: "postgresql:///postgres?host=\(cluster.directory.path),\(cluster.directory.path)"
                + "&port=\(cluster.port),\(cluster.port)&user=postgres", namespace: namespace
        ).encrypted(with: try WLStorageEncryptionKey.random())
        let wrong = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: wrongStore)
        #expect(wrong.wrappedValue == "")
        #expect(wrong.lastError?.code == .decodingFailed)
        wrong.wrappedValue = "replacement"
        wrong.update { $0 += "!" }
        wrong.flush()
        WLStorageSystem.flushAll()
        #expect(try Self.row(cluster, namespace, "token") == sealed, "the sealed value was replaced")
        #expect(wrong.hasPendingChanges, "the change was dropped rather than kept pending")
        #expect(wrong.lastError != nil)

        // A value written by the right key while the wrong one's change is pending: heard, and not replaced either.
        let late = WLStorage(key: "late", defaultValue: "", flushInterval: nil, store: wrongStore)
        late.wrappedValue = "wrong"
        let lateWriter = WLStorage(
            key: "late", defaultValue: "", flushInterval: 0, store: rightStore.encrypted(with: key))
        lateWriter.wrappedValue = "right"
        lateWriter.flush()
        let lateSealed = try #require(try Self.row(cluster, namespace, "late"))
        #expect(eventually(timeout: 60) { late.lastError?.code == .decodingFailed }, "\(late.lastError?.message ?? "")")
        WLStorageSystem.flushAll()
        late.flush()
        #expect(try Self.row(cluster, namespace, "late") == lateSealed, "the sealed value was replaced")
        #expect(late.hasPendingChanges)

        #expect(writer.wrappedValue == "secret")
        #expect(lateWriter.wrappedValue == "right")
        #expect(try rightStore.encrypted(with: key).read(key: "late") == bytes("\"right\""))
    }

    /// A program with the wrong key that ends (exit, SIGTERM) with a set and updates pending: the flush at exit, which
    /// writes a store's values in a batch, leaves the value it cannot open as it is.
    @Test(arguments: [SIGTERM, 0])
    func aProgramWithTheWrongKeyEndingWithChangesPendingLeavesTheValue(signal: Int32) throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace).encrypted(with: key)
        try store.write(key: "x", data: bytes("5"))
        let sealed = try #require(try Self.row(cluster, namespace, "x"))
        let wrong = try Replica(
            url: cluster.url, namespace: namespace, flushInterval: 3_600,
            encryptionKey: try WLStorageEncryptionKey.random().base64EncodedSecret)
        try wrong.set(7)
        wrong.send("increment 2")
        #expect(wrong.waitFor("incremented 2"))
        if signal == 0 { wrong.send("exit") } else { wrong.signal(signal) }
        #expect(wrong.waitForExit() != nil)
        #expect(try Self.row(cluster, namespace, "x") == sealed, "\(wrong.printedErrors)")
        #expect(try store.read(key: "x") == bytes("5"))
    }
}
