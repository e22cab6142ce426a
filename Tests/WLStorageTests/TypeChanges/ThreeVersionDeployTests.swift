import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

/// Where the fleet keeps the key: a directory, or the same encrypted.
enum DeployStore: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case directory, encrypted

    var testDescription: String { rawValue }

    func store(in directory: URL) throws -> any WLStorageStore {
        switch self {
        case .directory: WLStorageDirectoryStore.directory(directory)
        case .encrypted: WLStorageDirectoryStore.directory(directory).encrypted(with: try .random())
        }
    }
}

/// Three versions of a type with a rename and a rollback, on a directory (see ``ThreeVersionDeploy``).
@Suite(.capturingOutput) struct ThreeVersionDeployTests {
    @Test(arguments: DeployStore.allCases, [true, false])
    func aVersionRolledBackToReadsTheStoredValueAndItsUpdateKeepsEveryField(
        in kind: DeployStore, renameDeclared: Bool
    ) throws {
        try withTemporaryDirectory { directory in
            try ThreeVersionDeploy.aVersionRolledBackToReadsTheStoredValueAndItsUpdateKeepsEveryField(
                in: kind.store(in: directory), renameDeclared: renameDeclared)
        }
    }

    @Test(arguments: DeployStore.allCases)
    func aRunningOlderVersionFollowsTheNewerOnesChanges(in kind: DeployStore) throws {
        try withTemporaryDirectory { directory in
            let store = try kind.store(in: directory)
            try ThreeVersionDeploy.aRunningOlderVersionFollowsTheNewerOnesChanges(in: store, outside: store)
        }
    }

    @Test(arguments: DeployStore.allCases)
    func aVersionStartedDuringTheDeployReadsTheNewerShapeNotItsDefault(in kind: DeployStore) throws {
        try withTemporaryDirectory { directory in
            try ThreeVersionDeploy.aVersionStartedDuringTheDeployReadsTheNewerShapeNotItsDefault(
                in: kind.store(in: directory))
        }
    }

    @Test(arguments: DeployStore.allCases)
    func aChangeThroughEitherNameIsSeenByTheOtherVersion(in kind: DeployStore) throws {
        try withTemporaryDirectory { directory in
            try ThreeVersionDeploy.aChangeThroughEitherNameIsSeenByTheOtherVersion(in: kind.store(in: directory))
        }
    }

    @Test(arguments: DeployStore.allCases)
    func aValueAVersionCannotMapIsStillAnotherVersionsAndLeftAsItIs(in kind: DeployStore) throws {
        try withTemporaryDirectory { directory in
            try ThreeVersionDeploy.aValueAVersionCannotMapIsStillAnotherVersionsAndLeftAsItIs(
                in: kind.store(in: directory))
        }
    }
}
