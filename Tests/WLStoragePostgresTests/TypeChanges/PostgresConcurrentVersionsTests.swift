import Foundation
import Testing
import WLStorage
import WLStoragePostgres
import WLStorageTestSupport

/// Three versions of a type updating one row at once, with a rename and a rollback (see ``ConcurrentVersions``), plain
/// and encrypted.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresConcurrentVersionsTests {
    @Test(arguments: [false, true])
    func updatesOfThreeVersionsAtOnceCountOnceAndKeepEveryField(encrypted: Bool) throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        // Three spellings of one server: three identities, as three programs' stores are to one process.
        let stores = try (1...3).map { count -> any WLStorageStore in
            let hosts = Array(repeating: cluster.directory.path, count: count).joined(separator: ",")
            let ports = Array(repeating: String(cluster.port), count: count).joined(separator: ",")
            let store = try WLStoragePostgresStore(
                url: "postgresql:///postgres?host=\(hosts)&port=\(ports)&user=postgres", namespace: namespace,
                timeout: .seconds(10))
            return encrypted ? store.encrypted(with: key) : store
        }
        try ConcurrentVersions.updatesOfThreeVersionsAtOnceCountOnceAndKeepEveryField(stores: stores)
    }
}
