import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

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
            let flushing = startThread { flushAllStores([store]) }
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
            if notWritten > 0 { flushAllStores([store]) }
            for (index, storage) in storages.enumerated() {
                #expect(!storage.hasPendingChanges, "k\(index): \(storage.lastError?.message ?? "")")
                let stored = try reader.read(key: "k\(index)").map { String(decoding: $0, as: UTF8.self) }
                #expect(
                    stored == "\"\(round)-\(index)-\(padding)\"", "k\(index) holds \(stored?.prefix(20) ?? "nothing")")
            }
        }
    }

    private struct Entry: Codable, Sendable, Equatable {
        var text = ""
        var note = ""
    }

    /// As above, with objects read from the rows, every tenth of which another program changed in its other field
    /// unheard of (plain SQL, no notification): what the flush reports written holds this program's change and the
    /// other program's field; what stayed pending is written once the server is back, onto it as well.
    @Test(arguments: ["immediate", "fast"])
    func aFlushOfAllWhileTheServerRestartsLosesNoPendingObjectNorAnotherProgramsField(mode: String) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: "batch", timeout: .seconds(20))
        let count = 1_500
        let padding = String(repeating: "x", count: 2_000)
        let outside = try WLStoragePostgresStore(url: cluster.url, namespace: "batch", timeout: .seconds(60))
        try outside.write(
            (0..<count).map { WLStorageStoreWrite(key: "k\($0)", data: bytes(#"{"note":"","text":""}"#)) })
        let storages = (0..<count).map { index in
            WLStorage(key: "k\(index)", defaultValue: Entry(), flushInterval: nil, store: store)
        }
        #expect(storages.allSatisfy { $0.wrappedValue == Entry() })
        func idle<T>(_ storage: WLStorage<T>) -> Bool { storage.cell.state.withLock { !$0.isBusy } }
        #expect(eventually(timeout: 60) { storages.allSatisfy(idle) })
        for round in 0..<2 {
            for (index, storage) in storages.enumerated() { storage.wrappedValue.text = "\(round)-\(index)-\(padding)" }
            let admin = try adminConnection(cluster.url)
            try sqlValue(
                admin,
                """
                UPDATE wlstorage SET value = convert_to(jsonb_set(convert_from(value, 'UTF8')::jsonb, '{note}', \
                to_jsonb($2::text))::text, 'UTF8'), version = version + 1 WHERE namespace = $1 \
                AND substr(key, 2)::int % 10 = 0
                """, ["batch", "note\(round)"])
            let stopMode: PostgresCluster.StopMode = mode == "fast" ? .fast : .immediate
            admin.close()
            if round == 1 { try cluster.stop(mode: stopMode) }
            let flushing = startThread {
                ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
            }
            if round == 0 { try cluster.stop(mode: stopMode) }
            try cluster.start()
            flushing.wait()
            let reader = try WLStoragePostgresStore(url: cluster.url, namespace: "batch", timeout: .seconds(60))
            func check(_ index: Int) throws {
                let data = try #require(try reader.read(key: "k\(index)"), "k\(index)")
                let entry = try JSONDecoder().decode(Entry.self, from: data)
                #expect(entry.text == "\(round)-\(index)-\(padding)", "k\(index) holds \(entry.text.prefix(12))")
                let note = index % 10 == 0 ? "note\(round)" : ""
                #expect(entry.note == note, "k\(index): \(entry.note)")
            }
            var notWritten = 0
            for (index, storage) in storages.enumerated() {
                if storage.hasPendingChanges { notWritten += 1 } else { try check(index) }
            }
            if notWritten > 0 {
                #expect(
                    eventually(timeout: 120) {
                        ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
                        return storages.allSatisfy { !$0.hasPendingChanges }
                    })
            }
            for index in storages.indices { try check(index) }
        }
    }
}
