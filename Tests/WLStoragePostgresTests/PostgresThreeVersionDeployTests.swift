import Foundation
import Testing
import WLStorage
import WLStoragePostgres
import WLStorageTestSupport

/// Three versions of a type with a rename and a rollback, on a row of a PostgreSQL table, plain and encrypted (see
/// ``ThreeVersionDeploy``).
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresThreeVersionDeployTests {
    /// A namespace of its own, encrypted or not.
    private func store(encrypted: Bool, _ name: String = #function) throws -> any WLStorageStore {
        try stores(encrypted: encrypted, name).store
    }

    /// Two handles of a namespace of its own, with connections of their own, encrypted or not with one key: the second
    /// is another program's, whose writes the first one's feed reports.
    private func stores(encrypted: Bool, _ name: String = #function) throws
        -> (store: any WLStorageStore, outside: any WLStorageStore)
    {
        let (url, namespace, key) = (
            try PostgresCluster.shared().url, uniqueNamespace(name), try WLStorageEncryptionKey.random()
        )
        let handles = try (0..<2).map { _ -> any WLStorageStore in
            let store = try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10))
            return encrypted ? store.encrypted(with: key) : store
        }
        return (handles[0], handles[1])
    }

    @Test(arguments: [false, true], [true, false])
    func aVersionRolledBackToReadsTheStoredValueAndItsUpdateKeepsEveryField(encrypted: Bool, renameDeclared: Bool)
        throws
    {
        try ThreeVersionDeploy.aVersionRolledBackToReadsTheStoredValueAndItsUpdateKeepsEveryField(
            in: store(encrypted: encrypted), renameDeclared: renameDeclared)
    }

    @Test(arguments: [false, true])
    func aRunningOlderVersionFollowsTheNewerOnesChanges(encrypted: Bool) throws {
        let (store, outside) = try stores(encrypted: encrypted)
        try ThreeVersionDeploy.aRunningOlderVersionFollowsTheNewerOnesChanges(in: store, outside: outside)
    }

    @Test(arguments: [false, true])
    func aChangeThroughEitherNameIsSeenByTheOtherVersion(encrypted: Bool) throws {
        try ThreeVersionDeploy.aChangeThroughEitherNameIsSeenByTheOtherVersion(in: store(encrypted: encrypted))
    }

    @Test(arguments: [false, true])
    func aValueAVersionCannotMapIsStillAnotherVersionsAndLeftAsItIs(encrypted: Bool) throws {
        try ThreeVersionDeploy.aValueAVersionCannotMapIsStillAnotherVersionsAndLeftAsItIs(
            in: store(encrypted: encrypted))
    }
}
