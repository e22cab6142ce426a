import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

/// Two programs change different fields of one key of PostgreSQL, with the server crashing between their writes: each
/// program's write goes onto the other's, whether or not its feed told of it before the crash.
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFieldLevelWriteTests {
    struct Prefs: Codable, Sendable, Equatable {
        var theme = "light"
        var fontSize = 13
    }

    @Test func twoProgramsChangingDifferentFieldsAcrossAServerCrashKeepBothChanges() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let writer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        try writer.write(key: "prefs", data: bytes(#"{"fontSize":15,"theme":"dark"}"#))
        let a = WLStorage(
            key: "prefs", defaultValue: Prefs(), flushInterval: nil,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        let b = WLStorage(
            key: "prefs", defaultValue: Prefs(), flushInterval: nil,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        try #require(a.wrappedValue == Prefs(theme: "dark", fontSize: 15))
        try #require(b.wrappedValue == Prefs(theme: "dark", fontSize: 15))
        a.wrappedValue.theme = "blue"
        b.wrappedValue.fontSize = 20
        a.flush()
        #expect(a.lastError == nil)
        try cluster.restart(mode: .immediate)
        // The first tries may meet the restart: the change stays pending until a flush writes it.
        #expect(
            eventually(timeout: 120) {
                b.flush()
                return !b.hasPendingChanges
            }, "\(String(describing: b.lastError))")
        // A connection of its own for each read: a crash ends it.
        func row() throws -> String? {
            let admin = try adminConnection(cluster.url)
            defer { admin.close() }
            return try sqlValue(
                admin, "SELECT convert_from(value, 'UTF8') FROM wlstorage WHERE namespace = $1 AND key = $2",
                [namespace, "prefs"])
        }
        #expect(try row() == #"{"fontSize":20,"theme":"blue"}"#)
        // And again, the other way round, after another crash.
        a.wrappedValue.fontSize = 22
        try cluster.restart(mode: .immediate)
        b.wrappedValue.theme = "green"
        #expect(
            eventually(timeout: 120) {
                b.flush()
                return !b.hasPendingChanges
            }, "\(String(describing: b.lastError))")
        #expect(
            eventually(timeout: 120) {
                a.flush()
                return !a.hasPendingChanges
            }, "\(String(describing: a.lastError))")
        let text = try #require(try row())
        let stored = try JSONDecoder().decode(Prefs.self, from: Data(text.utf8))
        #expect(stored == Prefs(theme: "green", fontSize: 22), "the row holds \(text)")
        #expect(eventually(timeout: 120) { a.wrappedValue == stored && b.wrappedValue == stored })
    }
}
