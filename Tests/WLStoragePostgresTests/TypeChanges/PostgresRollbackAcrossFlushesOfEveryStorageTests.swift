import Foundation
import Testing
import WLStoragePostgres
import WLStorageTestSupport

@testable import WLStorage

/// A fleet deployed V1 → V2 → V3 and rolled back to V2 on rows of a PostgreSQL table, each program's changes written by
/// flushes of every storage (see ``RollbackDeploy``), plain and encrypted.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresRollbackAcrossFlushesOfEveryStorageTests {
    @Test(arguments: [false, true])
    func everyVersionsFieldsSurviveARollbackAcrossFlushesOfEveryStorage(encrypted: Bool) throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        // Six programs: handles of one namespace whose hosts are spelled a different number of times.
        let handles = try (1...6).map { spellings -> any WLStorageStore in
            let hosts = Array(repeating: cluster.directory.path, count: spellings).joined(separator: ",")
            let ports = Array(repeating: String(cluster.port), count: spellings).joined(separator: ",")
            let store = try WLStoragePostgresStore(
                url: "postgresql:///postgres?host=\(hosts)&port=\(ports)&user=postgres", namespace: namespace,
                timeout: .seconds(30))
            return encrypted ? store.encrypted(with: key) : store
        }
        try RollbackDeploy.everyVersionsFieldsSurviveARollbackAcrossFlushesOfEveryStorage(
            programs: handles, keys: (0..<12).map { String(format: "settings%02d", $0) })
    }
}
