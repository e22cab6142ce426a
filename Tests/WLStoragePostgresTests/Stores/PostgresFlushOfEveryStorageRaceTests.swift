import Foundation
import Testing
import WLStoragePostgres
import WLStorageTestSupport

/// Two threads flush every storage of a PostgreSQL store over and over beside sets, updates and another program's writes
/// on condition (see ``FlushOfEveryStorageRace``): the batches on condition, refused or not, lose and repeat nothing.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFlushOfEveryStorageRaceTests {
    @Test func twoFlushesOfEveryStorageAtOnceBesideSetsAndUpdatesKeepEveryChange() throws {
        let (url, namespace) = (try PostgresCluster.shared().url, uniqueNamespace())
        let store = try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(30))
        // Another program: a handle of the same rows with an identity of its own (its host spelled twice).
        let cluster = try PostgresCluster.shared()
        let outside = try WLStoragePostgresStore(
            url: "postgresql:///postgres?host=\(cluster.directory.path),\(cluster.directory.path)"
                + "&port=\(cluster.port),\(cluster.port)&user=postgres", namespace: namespace, timeout: .seconds(30))
        try #require(outside.identity != store.identity)
        try FlushOfEveryStorageRace.twoFlushesAtOnceBesideSetsAndUpdatesKeepEveryChange(
            store: store, outside: outside, keys: (0..<12).map { String(format: "job%02d", $0) }, rounds: 40)
    }
}
