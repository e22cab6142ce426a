import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

@testable import WLStorage

/// A flush of every storage whose batch on condition is cut (its request never forwarded, or its answer lost) while
/// another program changes two of its objects: one in a field of its own, one in the field this program changed.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdCutBatchFlushTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    /// Another program's change of a field of its own stays in either case. Its change of the field this program
    /// changed wins when made after this program's batch was stored (answer lost: it is newer), and loses when made
    /// before (request never forwarded: this program's write comes after it); no object stays pending.
    @Test(arguments: [TransactionCuttingRelay.Cut.request, .answer])
    func aCutBatchWithAnotherProgramsChangesMeanwhileKeepsTheNewerChangeOfEachField(
        cut: TransactionCuttingRelay.Cut
    ) async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace, timeout: .seconds(5))
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let keys = (0..<20).map { String(format: "p%02d", $0) }
            try other.write(keys.map { WLStorageStoreWrite(key: $0, data: Data(#"{"a":0,"b":0}"#.utf8)) })
            let storages = keys.map {
                WLStorage(key: $0, defaultValue: Pair(a: -1, b: -1), flushInterval: nil, store: store)
            }
            try #require(storages.allSatisfy { $0.wrappedValue == Pair(a: 0, b: 0) })
            try #require(eventually(timeout: 60) { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
            for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }

            // Meanwhile, another program reads each of two objects and changes it on condition.
            relay.cutNextWrite(cut) {
                for (key, change) in [("p03", { (pair: inout Pair) in pair.b = 30 }), ("p07", { $0.a = 70 })] {
                    for _ in 0..<100 {
                        guard let read = try? other.read(key: key),
                            var pair = try? JSONDecoder().decode(Pair.self, from: read)
                        else { continue }
                        change(&pair)
                        let data = (try? JSONEncoder().encode(pair)) ?? Data()
                        if (try? other.write(key: key, data: data, ifItHolds: read)) == true { break }
                    }
                }
            }
            ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
            #expect(relay.cutCount == 1, "the batch was cut")
            #expect(
                eventually(timeout: 60) {
                    ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
                    return storages.allSatisfy { !$0.hasPendingChanges }
                }, "\(storages.compactMap(\.lastError).prefix(3))")

            for (index, key) in keys.enumerated() {
                let stored = try JSONDecoder().decode(Pair.self, from: try #require(try other.read(key: key)))
                let a = key == "p07" && cut == .answer ? 70 : index + 1
                #expect(stored == Pair(a: a, b: key == "p03" ? 30 : 0), "\(key)")
            }
        }
    }
}
