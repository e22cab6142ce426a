import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// The table dropped by another program is created again.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresDroppedTableTests: PostgresFaultSuite {
    @Test func aDroppedTableIsCreatedAgain() throws {
        let cluster = try PostgresCluster.shared()
        let table = "fault_\(UUID().uuidString.prefix(8).lowercased())"
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: table)
        try store.write(key: "k", data: bytes("1"))
        let admin = try Self.admin(cluster.url)
        try Self.sql(admin, "DROP TABLE \(table)")
        // The next write may fail, clearly; one after it must store the value again.
        var failures: [any Error] = []
        for _ in 0..<3 {
            do {
                try store.write(key: "k", data: bytes("2"))
                break
            } catch {
                failures.append(error)
            }
        }
        #expect(failures.count <= 1, "writes keep failing after the table was dropped: \(failures)")
        #expect((try? store.read(key: "k")) == bytes("2"))
    }
}
