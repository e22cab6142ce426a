import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Two programs flush every storage at once over the same keys, as a fleet's instances stopped together do: their
/// batches lock the rows in one order (the keys'), so neither waits on the other's locks into a deadlock, which the
/// server breaks only after a second by failing a batch, and whose values would then stay pending at exit.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresOpposedBatchesTests {
    struct Entry: Codable, Equatable, Sendable {
        var a = 0
        var b = 0
    }

    /// Values written whole (numbers), and objects written on condition of what was read, each program changing a
    /// field of its own: every flush writes every value, and the rows end with both programs' changes.
    @Test(arguments: [false, true])
    func twoProgramsFlushingTheSameKeysAtOnceBothWriteEveryValue(objects: Bool) throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        // Two spellings of one server: stores with identities of their own, as two programs' are to one process.
        let urls = [
            cluster.url,
            "postgresql:///postgres?host=\(cluster.directory.path),\(cluster.directory.path)"
                + "&port=\(cluster.port),\(cluster.port)&user=postgres",
        ]
        let stores = try urls.map { try WLStoragePostgresStore(url: $0, namespace: namespace, timeout: .seconds(60)) }
        let keys = (0..<1_500).map { String(format: "k%03d", $0) }
        try stores[0].write(keys.map { WLStorageStoreWrite(key: "entry-" + $0, data: bytes(#"{"a":0,"b":0}"#)) })
        // Each program opens its storages in an order of its own.
        let numbers = stores.enumerated().map { side, store in
            (side == 0 ? keys : keys.reversed()).map {
                WLStorage(key: $0, defaultValue: 0, flushInterval: nil, store: store)
            }
        }
        let entries = stores.enumerated().map { side, store in
            (side == 0 ? keys : keys.reversed()).map {
                WLStorage(key: "entry-" + $0, defaultValue: Entry(), flushInterval: nil, store: store)
            }
        }
        for round in 1...3 {
            for side in 0..<2 {
                if objects {
                    for entry in entries[side] {
                        if side == 0 { entry.wrappedValue.a = round } else { entry.wrappedValue.b = round }
                    }
                } else {
                    for number in numbers[side] { number.wrappedValue = round * 10 + side }
                }
            }
            let flushes = stores.map { store in startThread { flushAllStores([store]) } }
            for flush in flushes { flush.wait() }
            let pending =
                (objects
                    ? entries.joined().filter(\.hasPendingChanges).map(\.key)
                    : numbers.joined().filter(\.hasPendingChanges).map(\.key))
            #expect(pending.isEmpty, "round \(round): \(pending.count) pending")
        }
        if objects {
            for key in keys {
                let stored = try stores[0].read(key: "entry-" + key).map {
                    try JSONDecoder().decode(Entry.self, from: $0)
                }
                #expect(stored == Entry(a: 3, b: 3), "\(key)")
            }
        }
    }

    /// A program's own batches, of the same keys in opposite orders, sent by two handles at once, whole and on
    /// condition: the store locks each statement's rows in the keys' order, so both complete, round after round.
    @Test(arguments: [false, true])
    func twoBatchesOfTheSameKeysInOppositeOrdersBothComplete(onCondition: Bool) throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let stores = try (0..<2).map { _ in
            try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(60))
        }
        let keys = (0..<400).map { String(format: "k%03d", $0) }
        try stores[0].write(keys.map { WLStorageStoreWrite(key: $0, data: bytes("00")) })
        var failures: [String] = []
        for round in 1...10 {
            let failed = Lock<[String]>([])
            let threads = stores.enumerated().map { side, store in
                startThread {
                    let ordered = side == 0 ? keys : keys.reversed()
                    let batch = ordered.map { WLStorageStoreWrite(key: $0, data: bytes("\(round)\(side)")) }
                    do {
                        if onCondition {
                            _ = try store.write(batch, ifTheyHold: ordered.map { _ in bytes("\(round - 1)0") })
                        } else {
                            try store.write(batch)
                        }
                    } catch {
                        failed.withLock { $0.append("round \(round), side \(side): \(error)") }
                    }
                }
            }
            for thread in threads { thread.wait() }
            failures += failed.withLock { $0 }
            // The next round's condition: every row holds side 0's bytes.
            try stores[0].write(keys.map { WLStorageStoreWrite(key: $0, data: bytes("\(round)0")) })
        }
        #expect(failures.isEmpty, "\(failures.count) batches failed: \(failures.prefix(1))")
    }
}
