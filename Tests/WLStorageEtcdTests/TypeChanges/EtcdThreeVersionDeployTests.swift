import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

// Three versions of a type share one etcd key, each in a program of its own (a store of its own: its own
// connections and feed): V1 `{name, count}`; V2 renames `count` to `total` (declared) and adds `label`; V3 adds
// `owner`. They write in turn, then V3 is rolled back to V2. What etcd holds is read with the raw API.

private struct FleetV1: Codable, Equatable, Sendable {
    var name = ""
    var count = 0
}

private struct FleetV2: Codable, Equatable, Sendable {
    var name = ""
    var total = 0
    var label = ""
}

private struct FleetV3: Codable, Equatable, Sendable {
    var name = ""
    var total = 0
    var label = ""
    var owner = ""
}

/// Three versions of a type with a rename and a rollback over one etcd key, and the scenarios every store runs (see
/// ``ThreeVersionDeploy``), plain and encrypted.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdThreeVersionDeployTests {
    /// Three handles of one namespace with identities of their own, as three programs' stores are to one process.
    private static func programs(_ server: EtcdServer, namespace: String) throws -> [WLStorageEtcdStore] {
        try [[server.endpoint], [server.otherSpelling], [server.endpoint, server.otherSpelling]].map {
            try WLStorageEtcdStore(endpoints: $0, namespace: namespace, timeout: .seconds(10))
        }
    }

    @Test func everyVersionKeepsWhatTheOthersWroteAndTheRenamedFieldHoldsTheLatestValueUnderBothNames() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let stores = try Self.programs(server, namespace: namespace)
            let rename: [WLStorageMigration<FleetV2>] = [.renamed(from: "count", to: "total")]
            let stored = { try #require(try rawObject(in: server, namespace: namespace, key: "job")) }

            let first = WLStorage(key: "job", defaultValue: FleetV1(), flushInterval: 0, store: stores[0])
            first.wrappedValue = FleetV1(name: "a", count: 1)
            first.flush()
            #expect(try stored() as NSDictionary == ["name": "a", "count": 1] as NSDictionary)

            // V2 starts: it reads the old name, and reading writes nothing.
            let second = WLStorage(
                key: "job", defaultValue: FleetV2(), flushInterval: 0, store: stores[1], migrations: rename)
            #expect(second.wrappedValue == FleetV2(name: "a", total: 1, label: ""))
            #expect(second.lastError == nil, "\(second.lastError?.message ?? "")")
            #expect(!second.hasPendingChanges, "reading wrote")
            second.update {
                $0.total = 2
                $0.label = "L2"
            }
            second.flush()
            var object = try stored()
            #expect(object["count"] as? Int == 2 && object["total"] as? Int == 2, "the rename split: \(object)")
            #expect(object["label"] as? String == "L2" && object["name"] as? String == "a")

            // V1, still running, hears V2's write and changes the old name; V2's field survives V1's write.
            #expect(eventually(timeout: 60) { first.wrappedValue.count == 2 }, "V1 holds \(first.wrappedValue)")
            first.update { $0.count = 3 }
            first.flush()
            object = try stored()
            #expect(object["count"] as? Int == 3)
            #expect(object["label"] as? String == "L2", "V1's write dropped V2's field: \(object)")
            #expect(
                eventually(timeout: 60) { second.wrappedValue.total == 3 }, "V2 holds \(second.wrappedValue)")

            // V3 starts, reads the change made through the old name, and adds its field.
            var third: WLStorage<FleetV3>! = WLStorage(
                key: "job", defaultValue: FleetV3(), flushInterval: 0, store: stores[2],
                migrations: [.renamed(from: "count", to: "total")])
            #expect(third.wrappedValue == FleetV3(name: "a", total: 3, label: "L2", owner: ""))
            #expect(third.lastError == nil, "\(third.lastError?.message ?? "")")
            #expect(!third.hasPendingChanges, "reading wrote")
            third.update {
                $0.total += 1
                $0.owner = "o3"
            }
            third.flush()
            object = try stored()
            #expect(object["count"] as? Int == 4 && object["total"] as? Int == 4, "the rename split: \(object)")
            #expect(object["owner"] as? String == "o3")

            // V2 and V1 hear it; each writes, and V3's field survives both writes.
            #expect(eventually(timeout: 60) { second.wrappedValue.total == 4 }, "V2 holds \(second.wrappedValue)")
            second.update { $0.label = "L2b" }
            second.flush()
            #expect(eventually(timeout: 60) { first.wrappedValue.count == 4 }, "V1 holds \(first.wrappedValue)")
            first.update { $0.name = "b" }
            first.flush()
            object = try stored()
            #expect(
                object as NSDictionary
                    == ["name": "b", "count": 4, "total": 4, "label": "L2b", "owner": "o3"] as NSDictionary,
                "a version's write lost what another wrote: \(object)")
            #expect(
                eventually(timeout: 60) {
                    third.wrappedValue == FleetV3(name: "b", total: 4, label: "L2b", owner: "o3")
                },
                "V3 holds \(third.wrappedValue)")

            // V3 is rolled back to V2: the program that ran V3 now opens the key as V2, which does not know `owner`.
            let revisionBefore = try #require(try rawEntry(in: server, namespace: namespace, key: "job")).revision
            third = nil
            let rolledBack = try Self.reopened {
                WLStorage(key: "job", defaultValue: FleetV2(), flushInterval: 0, store: stores[2], migrations: rename)
            }
            #expect(rolledBack.wrappedValue == FleetV2(name: "b", total: 4, label: "L2b"), "not its default")
            #expect(rolledBack.lastError == nil, "\(rolledBack.lastError?.message ?? "")")
            rolledBack.flush()
            #expect(
                try rawEntry(in: server, namespace: namespace, key: "job")?.revision == revisionBefore,
                "the rolled-back version wrote without a change of its own")
            rolledBack.update { $0.total += 1 }
            rolledBack.flush()
            object = try stored()
            #expect(
                object as NSDictionary
                    == ["name": "b", "count": 5, "total": 5, "label": "L2b", "owner": "o3"] as NSDictionary,
                "the rolled-back version lost a field or split the rename: \(object)")
            #expect(eventually(timeout: 60) { first.wrappedValue == FleetV1(name: "b", count: 5) })
            #expect(eventually(timeout: 60) { second.wrappedValue == FleetV2(name: "b", total: 5, label: "L2b") })
            for (index, error) in [first.lastError, second.lastError, rolledBack.lastError].enumerated() {
                #expect(error == nil, "program \(index + 1): \(error?.message ?? "")")
            }
        }
    }

    /// The key opened as another type with `open`, once the storage of the type before is released: a process opens a
    /// key of one store as one type at a time, and a released storage's cell may outlive it for a moment (a write or
    /// the feed holds it).
    private static func reopened<New>(_ open: () -> WLStorage<New>) throws -> WLStorage<New> {
        var opened = open()
        _ = eventually(timeout: 60) {
            guard opened.lastError?.code == .typeMismatch else { return true }
            opened = open()
            return opened.lastError?.code != .typeMismatch
        }
        try #require(opened.lastError?.code != .typeMismatch, "the released storage still holds the key")
        return opened
    }

    // The scenarios of every store.

    /// A namespace of its own, encrypted or not, and a second handle of it with another identity.
    private func stores(encrypted: Bool, _ name: String = #function) throws
        -> (store: any WLStorageStore, outside: any WLStorageStore)
    {
        let server = try EtcdServer.shared()
        let namespace = uniqueNamespace(name)
        let key = try WLStorageEncryptionKey.random()
        let handles = try Self.programs(server, namespace: namespace).prefix(2).map { store -> any WLStorageStore in
            encrypted ? store.encrypted(with: key) : store
        }
        return (handles[0], handles[1])
    }

    @Test(arguments: [false, true], [true, false])
    func aVersionRolledBackToReadsTheStoredValueAndItsUpdateKeepsEveryField(encrypted: Bool, renameDeclared: Bool)
        async throws
    {
        try await onItsOwnThread {
            try ThreeVersionDeploy.aVersionRolledBackToReadsTheStoredValueAndItsUpdateKeepsEveryField(
                in: stores(encrypted: encrypted).store, renameDeclared: renameDeclared)
        }
    }

    @Test(arguments: [false, true])
    func aRunningOlderVersionFollowsTheNewerOnesChanges(encrypted: Bool) async throws {
        try await onItsOwnThread {
            let (store, outside) = try stores(encrypted: encrypted)
            try ThreeVersionDeploy.aRunningOlderVersionFollowsTheNewerOnesChanges(in: store, outside: outside)
        }
    }

    @Test(arguments: [false, true])
    func aVersionStartedDuringTheDeployReadsTheNewerShapeNotItsDefault(encrypted: Bool) async throws {
        try await onItsOwnThread {
            try ThreeVersionDeploy.aVersionStartedDuringTheDeployReadsTheNewerShapeNotItsDefault(
                in: stores(encrypted: encrypted).store)
        }
    }

    @Test(arguments: [false, true])
    func aChangeThroughEitherNameIsSeenByTheOtherVersion(encrypted: Bool) async throws {
        try await onItsOwnThread {
            try ThreeVersionDeploy.aChangeThroughEitherNameIsSeenByTheOtherVersion(
                in: stores(encrypted: encrypted).store)
        }
    }

    @Test(arguments: [false, true])
    func aValueAVersionCannotMapIsStillAnotherVersionsAndLeftAsItIs(encrypted: Bool) async throws {
        try await onItsOwnThread {
            try ThreeVersionDeploy.aValueAVersionCannotMapIsStillAnotherVersionsAndLeftAsItIs(
                in: stores(encrypted: encrypted).store)
        }
    }
}
