import Foundation
import WLStorage
import WLStoragePostgres

/// ``WLStorageSystem/flushAll()`` of 1,000 and 10,000 pending keys of one store against the same rows written by
/// hand in one statement, over the loopback and through a proxy that adds a round trip of 1, 10 and 40 ms.
enum BatchCases {
    static func batch(_ harness: Harness) -> [Row] {
        let id = "pg-batch"
        guard let cluster = PostgresCases.cluster(for: id) else { return [] }
        do {
            let proxy = try DelayingProxy(to: cluster.port)
            var rows: [Row] = []
            for count in harness.quick ? [1_000] : [1_000, 10_000] {
                rows += try batch(harness, cluster: cluster, proxy: proxy, count: count)
            }
            return rows
        } catch {
            return PostgresCases.skip(id, error)
        }
    }

    /// The store's statement for many rows, written by hand for all of them at once: namespace, keys (`text[]`),
    /// values as text (`text[]`, stored as their UTF-8 bytes), channel, payloads (`text[]`).
    static let upsertAll = """
        WITH input AS (SELECT * FROM unnest($2::text[], $3::text[], $5::text[]) AS input(key, value, payload)), \
        written AS (INSERT INTO wlstorage AS stored (namespace, key, value, version) \
        SELECT $1, input.key, convert_to(input.value, 'UTF8'), 1 FROM input ON CONFLICT (namespace, key) DO UPDATE \
        SET value = EXCLUDED.value, version = stored.version + 1, updated_at = now() RETURNING stored.key) \
        SELECT pg_notify($4, input.payload) FROM written JOIN input ON input.key = written.key
        """

    private static func batch(_ harness: Harness, cluster: BenchmarkCluster, proxy: DelayingProxy, count: Int) throws
        -> [Row]
    {
        let url = "postgresql://postgres@127.0.0.1:\(proxy.port)/postgres"
        let namespace = "bench-batch-\(count)"
        let rawNamespace = "bench-batch-raw-\(count)"
        proxy.delay.store(0, ordering: .relaxed)
        let store = try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(60))
        let storages = (0..<count).map { WLStorage(key: "k\($0)", defaultValue: 0, flushInterval: nil, store: store) }
        WLStorageSystem.flushAll()
        // The store's batch alone, without the storages: what the flush adds to it is the core's.
        let direct = try WLStoragePostgresStore(
            url: url, namespace: "bench-batch-direct-\(count)", timeout: .seconds(60))
        try direct.write(key: "warm", data: Data("0".utf8))
        var directCount = 0
        let raw = try RawPostgresConnection(url: url)
        let keys = "{" + (0..<count).map { "k\($0)" }.joined(separator: ",") + "}"
        let payloads =
            "{" + (0..<count).map { "k:\(rawNamespace.utf8.count):\(rawNamespace)k\($0)" }.joined(separator: ",") + "}"
        var (libraryCount, rawCount) = (0, 0)
        // The library encodes each value with `JSONEncoder`, as the file store does; so does the fair baseline.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var failure: (any Error)?
        var leftPending = false
        let settings =
            harness.quick
            ? RunSettings(rounds: 2, warmUpRounds: 1, roundNanoseconds: 0, maximumOperations: 1)
            : RunSettings(rounds: 5, warmUpRounds: 1, roundNanoseconds: 0, maximumOperations: 1)
        var rows: [Row] = []
        for roundTrip in harness.quick ? [0] : [0, 1, 10, 40] {
            proxy.delay.store(UInt64(roundTrip) * 500_000, ordering: .relaxed)
            let results = harness.measure(
                [
                    Variant(name: "WLStorageSystem.flushAll()") { _ in
                        libraryCount += 1
                        for storage in storages { storage.wrappedValue = libraryCount }
                        sleep(nanoseconds: 20_000_000)
                        let start = monotonicNanoseconds()
                        WLStorageSystem.flushAll()
                        let elapsed = monotonicNanoseconds() - start
                        if storages.contains(where: \.hasPendingChanges) { leftPending = true }
                        return elapsed
                    },
                    Variant(name: "store.write(batch)") { _ in
                        directCount += 1
                        let data = Data("\(directCount)".utf8)
                        let writes = (0..<count).map { WLStorageStoreWrite(key: "k\($0)", data: data) }
                        sleep(nanoseconds: 20_000_000)
                        let start = monotonicNanoseconds()
                        do {
                            try direct.write(writes)
                        } catch {
                            failure = failure ?? error
                        }
                        return monotonicNanoseconds() - start
                    },
                    Variant(name: "by hand") { _ in
                        rawCount += 1
                        let values = "{" + String(repeating: "\(rawCount),", count: count).dropLast() + "}"
                        sleep(nanoseconds: 20_000_000)
                        let start = monotonicNanoseconds()
                        do {
                            try raw.execute(
                                upsertAll,
                                [
                                    .text(rawNamespace), .text(keys), .text(values), .text("wlstorage_changes"),
                                    .text(payloads),
                                ])
                        } catch {
                            failure = failure ?? error
                        }
                        return monotonicNanoseconds() - start
                    },
                    Variant(name: "by hand, encoding") { _ in
                        rawCount += 1
                        let value = rawCount
                        sleep(nanoseconds: 20_000_000)
                        let start = monotonicNanoseconds()
                        do {
                            // Each value encoded on its own, as each storage's is, and joined into the array's text.
                            var values = "{"
                            values.reserveCapacity(count * 8)
                            for index in 0..<count {
                                if index > 0 { values += "," }
                                values += String(decoding: try encoder.encode(value), as: UTF8.self)
                            }
                            values += "}"
                            try raw.execute(
                                upsertAll,
                                [
                                    .text(rawNamespace), .text(keys), .text(values), .text("wlstorage_changes"),
                                    .text(payloads),
                                ])
                        } catch {
                            failure = failure ?? error
                        }
                        return monotonicNanoseconds() - start
                    },
                ], settings: settings)
            if let failure { throw failure }
            var note = "\(PostgresCases.serverNote)"
            note += roundTrip == 0 ? ", directly" : ", through a proxy adding \(roundTrip) ms to each round trip"
            note += "; \(settings.rounds) rounds"
            if leftPending { note += "; values were left pending after flushAll(): the flush failed" }
            rows.append(
                Row(
                    caseID: "pg-batch",
                    title: "PostgreSQL: flush of \(count) pending keys, round trip +\(roundTrip) ms",
                    subject: "WLStorageSystem.flushAll(): transactions of up to 500 rows, in one pipeline",
                    value: results["WLStorageSystem.flushAll()"]!,
                    baseline: "the same rows by hand in one statement (unnest, upsert, pg_notify each)",
                    baselineValue: results["by hand"]!, note: note))
            rows.append(
                Row(
                    caseID: "pg-batch",
                    title:
                        "PostgreSQL: flush of \(count) pending keys against encoding them, round trip +\(roundTrip) ms",
                    subject: "WLStorageSystem.flushAll()",
                    value: results["WLStorageSystem.flushAll()"]!,
                    baseline:
                        "the same statement by hand, each value encoded with JSONEncoder first, as the library does",
                    baselineValue: results["by hand, encoding"]!, note: note))
            rows.append(
                Row(
                    caseID: "pg-batch",
                    title: "PostgreSQL: batch of \(count) writes, round trip +\(roundTrip) ms",
                    subject: "WLStoragePostgresStore.write(_:) alone, without storages",
                    value: results["store.write(batch)"]!,
                    baseline: "the same rows by hand in one statement (unnest, upsert, pg_notify each)",
                    baselineValue: results["by hand"]!, note: note))
        }
        proxy.delay.store(0, ordering: .relaxed)
        withExtendedLifetime(storages) {}
        return rows
    }
}

/// ``WLStorageSystem/flushAll()`` of 10,000 pending keys of a store that keeps its batches in memory, against the same
/// values encoded with `JSONEncoder` and handed to the same store's batch write: what the flush of the storages costs
/// beyond encoding the values and the store's own work.
enum BatchCoreCases {
    /// A store that keeps what it is given, in memory, and does nothing else.
    private final class MemoryBatchStore: WLStorageStore, @unchecked Sendable {  // values: `lock`
        let identity = "memory-batch:" + UUID().uuidString
        private let lock = NSLock()
        private var values: [String: Data] = [:]
        private(set) var batchWrites = 0

        func read(key: String) -> Data? { lock.withLock { values[key] } }
        func write(key: String, data: Data) { lock.withLock { values[key] = data } }
        func remove(key: String) { lock.withLock { values[key] = nil } }
        func keys() -> [String] { lock.withLock { Array(values.keys) } }
        func write(_ batch: [WLStorageStoreWrite]) {
            lock.withLock {
                batchWrites += batch.count
                blackHole(batch)
            }
        }
    }

    static func core(_ harness: Harness) -> [Row] {
        let count = harness.quick ? 1_000 : 10_000
        let store = MemoryBatchStore()
        let storages = (0..<count).map { WLStorage(key: "k\($0)", defaultValue: 0, flushInterval: nil, store: store) }
        WLStorageSystem.flushAll()
        let keys = (0..<count).map { "k\($0)" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var (libraryCount, rawCount) = (0, 0)
        var leftPending = false
        let settings =
            harness.quick
            ? RunSettings(rounds: 3, warmUpRounds: 1, roundNanoseconds: 0, maximumOperations: 1)
            : RunSettings(rounds: 15, warmUpRounds: 2, roundNanoseconds: 0, maximumOperations: 1)
        let results = harness.measure(
            [
                Variant(name: "WLStorageSystem.flushAll()") { _ in
                    libraryCount += 1
                    for storage in storages { storage.wrappedValue = libraryCount }
                    let start = monotonicNanoseconds()
                    WLStorageSystem.flushAll()
                    let elapsed = monotonicNanoseconds() - start
                    if storages.contains(where: \.hasPendingChanges) { leftPending = true }
                    return elapsed
                },
                Variant(name: "encode and store.write(batch)") { _ in
                    rawCount += 1
                    let value = rawCount
                    let start = monotonicNanoseconds()
                    var writes: [WLStorageStoreWrite] = []
                    writes.reserveCapacity(count)
                    for key in keys {
                        writes.append(WLStorageStoreWrite(key: key, data: (try? encoder.encode(value)) ?? Data()))
                    }
                    store.write(writes)
                    return monotonicNanoseconds() - start
                },
            ], settings: settings)
        withExtendedLifetime(storages) {}
        var note = "\(settings.rounds) rounds"
        if leftPending { note += "; values were left pending after flushAll()" }
        return [
            Row(
                caseID: "batch-core",
                title: "flush of \(count) pending keys of a store in memory",
                subject: "WLStorageSystem.flushAll()",
                value: results["WLStorageSystem.flushAll()"]!,
                baseline: "each value encoded with JSONEncoder, then the store's batch write",
                baselineValue: results["encode and store.write(batch)"]!, note: note)
        ]
    }
}
