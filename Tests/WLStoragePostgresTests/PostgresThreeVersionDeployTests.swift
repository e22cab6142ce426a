import Foundation
import Testing
import WLStorage
import WLStoragePostgres
import WLStorageTestSupport

/// Three versions of a type with a rename and a rollback, on a row of a PostgreSQL table, plain and encrypted (see
/// ``ThreeVersionDeploy``).
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresThreeVersionDeployTests {
    /// A namespace of its own, encrypted or not.
    private func store(encrypted: Bool, _ name: String = #function) throws -> any WLStorageStore {
        let store = try WLStoragePostgresStore(
            url: try PostgresCluster.shared().url, namespace: uniqueNamespace(name), timeout: .seconds(10))
        return encrypted ? store.encrypted(with: try .random()) : store
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
        try ThreeVersionDeploy.aRunningOlderVersionFollowsTheNewerOnesChanges(in: store(encrypted: encrypted))
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
