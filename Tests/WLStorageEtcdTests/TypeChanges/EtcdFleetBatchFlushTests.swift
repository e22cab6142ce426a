import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

@testable import WLStorage

private struct JobV1: Codable, Equatable, Sendable {
    var name = ""
    var count = 0
}

private struct JobV2: Codable, Equatable, Sendable {
    var name = ""
    var total = 0
    var label = ""
}

private struct JobV3: Codable, Equatable, Sendable {
    var name = ""
    var total = 0
    var owner = ""
}

/// Three versions of a type share 150 etcd keys, each version a program of its own (V1 `{name, count}`; V2 renames
/// `count` to `total`, declared, and adds `label`; V3 drops `label` and adds `owner`), and each exits with a change
/// pending in every key: their flushes of every storage send them in batches on condition (two transactions each), at
/// once.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdFleetBatchFlushTests {
    /// Every key ends with each version's change: V1's name, V2's label, V3's owner and its total under both names,
    /// whichever batch went first and whichever objects were refused and written on their own.
    @Test func threeVersionsFlushingTheirPendingObjectsAtOnceKeepEveryVersionsField() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let stores = try [[server.endpoint], [server.otherSpelling], [server.endpoint, server.otherSpelling]].map {
                try WLStorageEtcdStore(endpoints: $0, namespace: namespace, timeout: .seconds(10))
            }
            let keys = (0..<150).map { String(format: "j%03d", $0) }
            try stores[0].write(keys.map { WLStorageStoreWrite(key: $0, data: Data(#"{"count":0,"name":""}"#.utf8)) })
            let v1 = keys.map { WLStorage(key: $0, defaultValue: JobV1(), flushInterval: nil, store: stores[0]) }
            let v2 = keys.map {
                WLStorage(
                    key: $0, defaultValue: JobV2(), flushInterval: nil, store: stores[1],
                    migrations: [.renamed(from: "count", to: "total")])
            }
            let v3 = keys.map {
                WLStorage(
                    key: $0, defaultValue: JobV3(), flushInterval: nil, store: stores[2],
                    migrations: [.renamed(from: "count", to: "total")])
            }
            try #require(v1.allSatisfy { $0.wrappedValue == JobV1() } && v2.allSatisfy { $0.wrappedValue == JobV2() })
            try #require(v3.allSatisfy { $0.wrappedValue == JobV3() })
            func idle<T>(_ storage: WLStorage<T>) -> Bool { storage.cell.state.withLock { !$0.isBusy } }
            try #require(eventually(timeout: 60) { v1.allSatisfy(idle) && v2.allSatisfy(idle) && v3.allSatisfy(idle) })
            for storage in v1 { storage.wrappedValue.name = "n" }
            for storage in v2 { storage.wrappedValue.label = "L" }
            for (index, storage) in v3.enumerated() {
                storage.wrappedValue.owner = "o"
                if index % 2 == 0 { storage.wrappedValue.total = 7 }
            }

            let flushes = stores.map { store in
                startThread { ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity }) }
            }
            for flush in flushes { #expect(flush.wait(timeout: .now() + 300) == .success) }
            // A change left pending (other programs' changes kept coming) goes at the next flushes.
            #expect(
                eventually(timeout: 120) {
                    for store in stores {
                        ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
                    }
                    return v1.allSatisfy { !$0.hasPendingChanges } && v2.allSatisfy { !$0.hasPendingChanges }
                        && v3.allSatisfy { !$0.hasPendingChanges }
                }, "\((v1.compactMap(\.lastError) + v2.compactMap(\.lastError)).prefix(3))")

            for (index, key) in keys.enumerated() {
                let object = try #require(try rawObject(in: server, namespace: namespace, key: key))
                let total = index % 2 == 0 ? 7 : 0
                let expected: NSDictionary = [
                    "name": "n", "count": total, "total": total, "label": "L", "owner": "o",
                ]
                #expect(object as NSDictionary == expected, "\(key)")
            }
        }
    }
}
