import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Storages of a PostgreSQL store while the server is down, and once it is back: what they keep, and what they never
/// write over. Each test has a server of its own.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresStorageOutageTests {
    init() {
        ReportedErrors.install()
    }

    @Test func aStorageStartedWhileTheServerIsDownNeverWritesItsDefaultOverTheStoredValue() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let writer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        try writer.write(key: "limit", data: bytes("9"))
        try cluster.stop()

        // Another store handle (a program starting now) with the server down: the default, and the failed read,
        // reported.
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        let storage = WLStorage(key: "limit", defaultValue: 0, flushInterval: 0, store: store)
        #expect(storage.wrappedValue == 0)
        #expect(storage.lastError?.code == .readFailed)
        storage.wrappedValue = 1  // based on the default
        storage.flush()
        #expect(storage.hasPendingChanges)

        try cluster.start()
        // The storage reads the row before it writes anything: the stored value wins over the changes made on the
        // default.
        #expect(eventually(timeout: 30) { storage.wrappedValue == 9 }, "\(String(describing: storage.lastError))")
        storage.flush()
        #expect(try writer.read(key: "limit") == bytes("9"))
        #expect(!storage.hasPendingChanges)
    }

    @Test(arguments: [PostgresCluster.StopMode.fast, .immediate])
    func changesMadeWhileTheServerIsDownStayPendingAndAreWrittenOnceItIsBack(mode: PostgresCluster.StopMode) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        let storage = WLStorage(key: "cursor", defaultValue: 0, flushInterval: 0, store: store)
        storage.wrappedValue = 1
        storage.flush()
        try cluster.stop(mode: mode)

        for value in 2...5 { storage.wrappedValue = value }
        storage.flush()
        #expect(storage.hasPendingChanges)
        #expect(storage.lastError?.code == .writeFailed)

        try cluster.start()
        // Retried with the backoff: no flush needed.
        let reader = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        #expect(eventually(timeout: 30) { (try? reader.read(key: "cursor")) == bytes("5") })
        #expect(eventually(timeout: 30) { !storage.hasPendingChanges })
    }
}
