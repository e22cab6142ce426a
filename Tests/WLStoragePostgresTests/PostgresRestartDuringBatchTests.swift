import Foundation
import Testing
import WLStorage
import WLStoragePostgres
import WLStorageTestSupport

/// A flush of every storage while the server restarts as after a crash: what it reports written is in the table, once;
/// what it could not write stays pending, and is written once the server is back.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresRestartDuringBatchTests {
    @Test(arguments: ["immediate", "fast"])
    func aFlushOfAllWhileTheServerRestartsLosesNoPendingValue(mode: String) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: "batch", timeout: .seconds(20))
        let count = 1_500
        let padding = String(repeating: "x", count: 2_000)
        let storages = (0..<count).map { index in
            WLStorage(key: "k\(index)", defaultValue: "", flushInterval: nil, store: store)
        }
        for round in 0..<2 {
            for (index, storage) in storages.enumerated() { storage.wrappedValue = "\(round)-\(index)-\(padding)" }
            // Round 0: the restart begins while the batch is sent; round 1: the batch begins with the server down.
            let stopMode: PostgresCluster.StopMode = mode == "fast" ? .fast : .immediate
            if round == 1 { try cluster.stop(mode: stopMode) }
            let flushing = startThread { WLStorageSystem.flushAll() }
            if round == 0 { try cluster.stop(mode: stopMode) }
            try cluster.start()
            flushing.wait()
            let reader = try WLStoragePostgresStore(url: cluster.url, namespace: "batch", timeout: .seconds(60))
            var notWritten = 0
            for (index, storage) in storages.enumerated() {
                let expected = "\"\(round)-\(index)-\(padding)\""
                let stored = try reader.read(key: "k\(index)").map { String(decoding: $0, as: UTF8.self) }
                if storage.hasPendingChanges {
                    notWritten += 1
                } else {
                    #expect(stored == expected, "k\(index) was reported written and holds \(stored ?? "nothing")")
                }
            }
            // What stayed pending is written now that the server is back.
            if notWritten > 0 { WLStorageSystem.flushAll() }
            for (index, storage) in storages.enumerated() {
                #expect(!storage.hasPendingChanges, "k\(index): \(storage.lastError?.message ?? "")")
                let stored = try reader.read(key: "k\(index)").map { String(decoding: $0, as: UTF8.self) }
                #expect(
                    stored == "\"\(round)-\(index)-\(padding)\"", "k\(index) holds \(stored?.prefix(20) ?? "nothing")")
            }
        }
    }
}
