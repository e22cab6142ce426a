import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

@testable import WLStorage

/// A flush of every storage of a store over a three-member etcd cluster, its objects in a batch on condition, while
/// the leader is killed and another program changes other fields of some of the objects.
@Suite(.enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason), .capturingOutput, .serialized)
struct EtcdClusterFlushTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    /// 300 objects, each changed (`a`), are flushed with every storage while the leader is killed and another program
    /// sets `b` of every tenth one (reading it and writing on condition, again until stored). Once the member is back
    /// and the changes left pending are flushed, each object holds this program's `a` and the other program's `b`:
    /// no pending change lost, no other program's field overwritten.
    @Test func aFlushOfThreeHundredObjectsThroughALeaderChangeLosesNoChangeOfEitherProgram() throws {
        ReportedErrors.install()
        let cluster = try EtcdCluster.started()
        defer { cluster.remove() }
        let namespace = uniqueNamespace()
        let store = try WLStorageEtcdStore(endpoints: cluster.endpoints, namespace: namespace, timeout: .seconds(5))
        let other = try WLStorageEtcdStore(
            endpoints: cluster.otherSpellings.reversed(), namespace: namespace, timeout: .seconds(5))
        let keys = (0..<300).map { String(format: "o%03d", $0) }
        try other.write(keys.map { WLStorageStoreWrite(key: $0, data: Data(#"{"a":0,"b":0}"#.utf8)) })
        let storages = keys.map {
            WLStorage(key: $0, defaultValue: Pair(a: -1, b: -1), flushInterval: nil, store: store)
        }
        try #require(storages.allSatisfy { $0.wrappedValue == Pair(a: 0, b: 0) })
        try #require(eventually(timeout: 60) { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }

        let changed = keys.enumerated().filter { $0.offset % 10 == 0 }.map(\.element)
        let changing = startThread {
            for key in changed {
                for _ in 0..<200 {
                    guard let read = try? other.read(key: key),
                        var pair = try? JSONDecoder().decode(Pair.self, from: read)
                    else { continue }
                    pair.b = 1
                    let data = (try? JSONEncoder().encode(pair)) ?? Data()
                    if (try? other.write(key: key, data: data, ifItHolds: read)) == true { break }
                }
            }
        }
        let flushing = startThread { ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity }) }
        let leader = try #require(cluster.leader(), "a leader\n\(cluster.logs)")
        cluster.stop(leader)
        #expect(flushing.wait(timeout: .now() + 300) == .success, "the flush ended")
        #expect(changing.wait(timeout: .now() + 300) == .success, "the other program's changes ended")
        try cluster.restart(leader)
        // What the flush left pending (a write that failed with the leader gone) goes at the next flushes.
        #expect(
            eventually(timeout: 120) {
                ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
                return storages.allSatisfy { !$0.hasPendingChanges }
            }, "\(storages.compactMap(\.lastError).prefix(3))")

        for (index, key) in keys.enumerated() {
            let stored = try #require(try other.read(key: key), "\(key)")
            let pair = try JSONDecoder().decode(Pair.self, from: stored)
            #expect(pair == Pair(a: index + 1, b: changed.contains(key) ? 1 : 0), "\(key)")
        }
    }
}
