import Foundation
import Testing
import WLStoragePostgres
import WLStorageTestSupport

@testable import WLStorage

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

    private struct FleetV1: Codable, Equatable, Sendable {
        var theme = "light"
        var fontSize = 13
    }

    private struct FleetV2: Codable, Equatable, Sendable {
        var theme = "light"
        var fontSize = 13
        var lineSpacing = 1.0
    }

    private struct FleetV3: Codable, Equatable, Sendable {
        var colorScheme = "light"
        var fontSize = 13
    }

    /// Three programs, one of each version (handles of one namespace with identities of their own: cells of their own),
    /// have each changed another field of the row when every storage is flushed, their three batches on condition side
    /// by side: the row ends with every change, the field only V2 knows, and V3's renamed one under both names.
    @Test(arguments: [false, true])
    func threeVersionsChangingOneRowInOneFlushOfEveryStorageKeepEveryFieldUnderEitherName(encrypted: Bool) throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let handles = try (1...4).map { spellings -> any WLStorageStore in
            let hosts = Array(repeating: cluster.directory.path, count: spellings).joined(separator: ",")
            let ports = Array(repeating: String(cluster.port), count: spellings).joined(separator: ",")
            let store = try WLStoragePostgresStore(
                url: "postgresql:///postgres?host=\(hosts)&port=\(ports)&user=postgres", namespace: namespace,
                timeout: .seconds(30))
            return encrypted ? store.encrypted(with: key) : store
        }
        let outside = handles[3]
        for round in 0..<5 {
            try outside.write(
                key: "settings", data: bytes(#"{"fontSize":13,"lineSpacing":1.5,"theme":"light"}"#))
            let first = WLStorage(key: "settings", defaultValue: FleetV1(), flushInterval: nil, store: handles[0])
            let second = WLStorage(key: "settings", defaultValue: FleetV2(), flushInterval: nil, store: handles[1])
            let third = WLStorage(
                key: "settings", defaultValue: FleetV3(), flushInterval: nil, store: handles[2],
                migrations: [.renamed(from: "theme", to: "colorScheme")])
            #expect(
                eventually {
                    first.wrappedValue.fontSize == 13 && second.wrappedValue.lineSpacing == 1.5
                        && third.wrappedValue.colorScheme == "light"
                })
            func idle<T>(_ storage: WLStorage<T>) -> Bool { storage.cell.state.withLock { !$0.isBusy } }
            #expect(eventually { idle(first) && idle(second) && idle(third) })
            first.wrappedValue.fontSize = 20 + round
            second.wrappedValue.lineSpacing = 2.5
            third.wrappedValue.colorScheme = "dark\(round)"
            let identities = Set(handles.map(\.identity))
            ShutdownHandling.flushEverything(only: { $0.storeKey?.store.map(identities.contains) ?? false })
            for storage in [first.lastError, second.lastError, third.lastError] {
                #expect(storage == nil, "\(String(describing: storage))")
            }
            #expect(!first.hasPendingChanges && !second.hasPendingChanges && !third.hasPendingChanges)
            let data = try #require(try outside.read(key: "settings"))
            let row = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let text = String(decoding: data, as: UTF8.self)
            #expect(row["fontSize"] as? Int == 20 + round, "\(text)")
            #expect(row["lineSpacing"] as? Double == 2.5, "\(text)")
            #expect(row["colorScheme"] as? String == "dark\(round)", "\(text)")
            #expect(row["theme"] as? String == "dark\(round)", "\(text)")
        }
    }
}
