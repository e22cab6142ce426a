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
        flushAllStores([wrongStore])
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
        flushAllStores([wrongStore])
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

    /// A program with the wrong key started while the server is down, its change made on the default: once the server
    /// is back, it reads the value it cannot open and writes nothing over it; with a type changed and a field renamed.
    @Test func aProgramWithTheWrongKeyStartedWhileTheServerIsDownNeverWritesOverTheValue() throws {
        struct Renamed: Codable, Equatable { var limit = 0 }
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        let right = store.encrypted(with: try .random())
        try right.write(key: "n", data: bytes("9"))
        try right.write(key: "r", data: bytes(#"{"max":9}"#))
        let row = { (key: String) in try store.readWithVersion(key: key).map { "\($0.data) \($0.version)" } }
        let sealed = try [row("n"), row("r")]
        try cluster.stop()

        let wrong = store.encrypted(with: try .random())
        let number = WLStorage(key: "n", defaultValue: 0, flushInterval: 0, store: wrong)
        let renamed = WLStorage(
            key: "r", defaultValue: Renamed(), flushInterval: 0, store: wrong,
            migrations: [.renamed(from: "max", to: "limit")])
        #expect(number.lastError?.code == .readFailed)
        number.wrappedValue = 1
        renamed.wrappedValue.limit = 1
        try cluster.start()
        #expect(
            eventually(timeout: 60) { number.lastError?.code == .decodingFailed },
            "\(String(describing: number.lastError))")
        #expect(
            eventually(timeout: 60) { renamed.lastError?.code == .decodingFailed },
            "\(String(describing: renamed.lastError))")
        number.update { $0 += 1 }
        renamed.update { $0.limit += 1 }
        number.flush()
        renamed.flush()
        flushAllStores([wrong])
        #expect(try [row("n"), row("r")] == sealed)
        #expect(number.hasPendingChanges && renamed.hasPendingChanges)
    }

    /// A program with the wrong key sets an object just after a program with the right key stored it, before hearing of
    /// it: the set is written on condition of what was read, so it never replaces the value, flushed on its own or
    /// with every storage (a batch, written whole). Before, each of these sets replaced the value.
    @Test func aSetOfAnObjectNeverReplacesAValueOfTheRightKeyNotHeardOfYet() throws {
        let cluster = try PostgresCluster.shared()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace())
        let right = store.encrypted(with: try .random())
        let wrong = store.encrypted(with: try .random())
        for index in 0..<8 {
            let key = "k\(index)"
            let storage = WLStorage(
                key: key, defaultValue: ["n": 0], flushInterval: index % 2 == 0 ? nil : 0, store: wrong)
            storage.wrappedValue = ["n": 1]
            if index % 4 < 2 { storage.flush() }
            try right.write(key: key, data: bytes(#"{"n":9}"#))
            storage.wrappedValue = ["n": 2]
            if index < 4 { storage.flush() } else { flushAllStores([wrong]) }
            #expect((try? right.read(key: key)) == bytes(#"{"n":9}"#), "\(key)")
            #expect(storage.hasPendingChanges, "\(key)")
        }
    }
}
