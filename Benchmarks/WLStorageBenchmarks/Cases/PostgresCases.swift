import Dispatch
import Foundation
import Synchronization
import WLStorage
import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why cases produced no rows, for the report's `skipped:` lines.
let skipLog = Mutex<[String]>([])

/// The store's SQL, written out by hand for the baselines: the table, and the upsert that notifies in one statement.
enum HandWrittenSQL {
    static func createTable(_ table: String) -> String {
        """
        CREATE TABLE IF NOT EXISTS "\(table)" (namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, \
        version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, key))
        """
    }

    /// Parameters: namespace, key, value (bytea), channel, payload.
    static func upsert(_ table: String) -> String {
        """
        WITH written AS (INSERT INTO "\(table)" AS stored (namespace, key, value, version) VALUES ($1, $2, $3, 1) \
        ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, version = stored.version + 1, \
        updated_at = now() RETURNING 1) SELECT pg_notify($4, $5) FROM written
        """
    }

    /// The upsert whose notification carries the row's new version, the table's OID and the bytes written in Base64
    /// after the payload `$5`, as the store's does: the same statement, and the same payload size. Parameters as
    /// ``upsert(_:)``.
    static func upsertCarryingValue(_ table: String) -> String {
        """
        WITH written AS (INSERT INTO "\(table)" AS stored (namespace, key, value, version) VALUES ($1, $2, $3, 1) \
        ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, version = stored.version + 1, \
        updated_at = now() RETURNING stored.version) SELECT pg_notify($4, $5 || written.version::text || '.' || \
        '"\(table)"'::regclass::oid::text || CASE WHEN octet_length($5) + 34 + 4 * ((octet_length($3) + 2) / 3) \
        <= 7900 THEN ':' || translate(encode($3, 'base64'), chr(10), '') ELSE '' END) FROM written
        """
    }

    /// The value a payload of ``upsertCarryingValue(_:)`` carries, when its bytes are an integer's.
    static func carriedInteger(_ payload: String) -> Int? {
        guard let colon = payload.utf8.lastIndex(of: UInt8(ascii: ":")),
            let bytes = Data(base64Encoded: String(payload[payload.index(after: colon)...]))
        else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self))
    }
}

/// A listening connection of the propagation floor: a thread that waits on its socket with `poll`, reads with
/// `PQconsumeInput` and takes the notifications with `PQnotifies`, noting when each value first arrived. The value is
/// the one the payload carries (``HandWrittenSQL/carriedInteger(_:)``); `heard`, when given, is called with each new
/// value and its time, on the listener's thread.
final class FloorListener: Sendable {
    private let connection: RawPostgresConnection
    private let stopped = Atomic<Bool>(false)
    private let ended = DispatchSemaphore(value: 0)
    /// Each value received (the payload is the value), with the monotonic time it was first received.
    let received = Mutex<[Int: UInt64]>([:])

    init(url: String, channel: String, heard: (@Sendable (Int, UInt64) -> Void)? = nil) throws {
        connection = try RawPostgresConnection(url: url)
        try connection.execute("LISTEN \"\(channel)\"")
        Thread.detachNewThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                guard let payloads = try? connection.notifications(timeout: 50) else { break }
                let now = monotonicNanoseconds()
                guard !payloads.isEmpty else { continue }
                let new = received.withLock { received in
                    var new: [Int] = []
                    for payload in payloads {
                        if let value = HandWrittenSQL.carriedInteger(payload), received[value] == nil {
                            received[value] = now
                            new.append(value)
                        }
                    }
                    return new
                }
                if let heard { for value in new { heard(value, now) } }
            }
            ended.signal()
        }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        ended.wait()
    }
}

/// The PostgreSQL store against libpq used by hand, on a throwaway server over the loopback (``BenchmarkCluster``).
enum PostgresCases {
    /// The server, or `nil` after saying why the case is skipped.
    static func cluster(for id: String) -> BenchmarkCluster? {
        switch BenchmarkCluster.shared {
        case .success(let cluster):
            return cluster
        case .failure(let failure):
            let line = "\(id): \(failure.description)"
            FileHandle.standardError.write(Data("skipped: \(line)\n".utf8))
            skipLog.withLock { $0.append(line) }
            return nil
        }
    }

    static func skip(_ id: String, _ error: any Error) -> [Row] {
        let line = "\(id): \(error)"
        FileHandle.standardError.write(Data("skipped: \(line)\n".utf8))
        skipLog.withLock { $0.append(line) }
        return []
    }

    static var serverNote: String {
        "TCP over 127.0.0.1, fsync \(BenchmarkCluster.fsync ? "on" : "off")"
    }

    /// The value at `fraction` (0.5, 0.99) of `samples`, by nearest rank.
    static func percentile(_ samples: [Double], _ fraction: Double) -> Double {
        let sorted = samples.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[max(0, min(sorted.count - 1, rank - 1))]
    }

    // MARK: Propagation

    static func propagation(_ harness: Harness) -> [Row] {
        propagation(harness, delivery: .queue)
    }

    /// The same, with the replicas' handlers called on the thread that delivers the change (`onChange(queue: nil)`).
    static func propagationWithoutQueue(_ harness: Harness) -> [Row] {
        propagation(harness, delivery: .noQueue)
    }

    private static func propagation(_ harness: Harness, delivery: ReplicaDelivery) -> [Row] {
        let id = propagationID(delivery)
        guard let cluster = cluster(for: id) else { return [] }
        do {
            return try propagation(harness, url: cluster.url, delivery: delivery)
        } catch {
            return skip(id, error)
        }
    }

    private static func propagationID(_ delivery: ReplicaDelivery) -> String {
        switch delivery {
        case .queue: "pg-propagation"
        case .noQueue: "pg-propagation-no-queue"
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static func propagation(_ harness: Harness, url: String, delivery: ReplicaDelivery) throws -> [Row] {
        let id = propagationID(delivery)
        let rounds = harness.quick ? 1 : 3
        let sendsPerRound = harness.quick ? 30 : 300
        // One send every 5 ms, the library's and the floor's in turn: each side sends every 10 ms.
        let period: UInt64 = 5_000_000
        let namespace = "bench-propagation"
        let key = "value"

        // The floor: a writer and three listening connections, on a table and channel of their own. Two of them are in
        // the replica processes, beside the library's listeners whose deliveries are measured, and are the ones measured:
        // each side's notification wakes a thread in the same two processes. The third is in this process, as the
        // writing storage's own listener is.
        let floorTable = "wlstorage_floor"
        let floorChannel = floorTable + "_changes"
        let writer = try RawPostgresConnection(url: url)
        try writer.execute(HandWrittenSQL.createTable(floorTable))
        let upsert = HandWrittenSQL.upsertCarryingValue(floorTable)
        // The store's payload for the key, with the floor's table: the notification is as long as the store's.
        let payload = "*:\(namespace.utf8.count):\(namespace)c\(key.utf8.count):\(key)"
        let listeners = [try FloorListener(url: url, channel: floorChannel)]
        defer { for listener in listeners { listener.stop() } }
        func floorSend(_ value: Int) throws {
            try writer.execute(
                upsert,
                [
                    .text(namespace), .text(key), .bytes(Data(String(value).utf8)), .text(floorChannel),
                    .text(payload),
                ])
        }

        // The library: this process's replica, whose every set is written at once (flushInterval 0), and two others.
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let storage = WLStorage(key: key, defaultValue: 0, flushInterval: 0, store: store)
        let replicas = try (0..<2).map { _ in
            try ReplicaProcess(url: url, namespace: namespace, key: key, delivery: delivery, floorChannel: floorChannel)
        }
        defer { for replica in replicas { replica.stop() } }

        // Warm-up: negative values until every replica and listener has received one, then 20 more of each.
        try warmUp(
            storage, replicas: replicas, listeners: listeners, period: period, extra: 20, seconds: 60,
            floorSend: floorSend)

        var libraryP50: [Double] = []
        var libraryP99: [Double] = []
        var floorP50: [Double] = []
        var floorP99: [Double] = []
        var (librarySamples, floorSamples, libraryMissing, floorMissing) = (0, 0, 0, 0)
        var value = 0
        for _ in 0..<rounds {
            var librarySent: [Int: UInt64] = [:]
            var floorSent: [Int: UInt64] = [:]
            var next = monotonicNanoseconds()
            for step in 0..<(2 * sendsPerRound) {
                sleep(until: next)
                next += period
                if step % 2 == 0 {
                    value += 1
                    librarySent[value] = monotonicNanoseconds()
                    storage.wrappedValue = value
                } else {
                    floorSent[value] = monotonicNanoseconds()
                    try floorSend(value)
                }
            }
            // Everything delivered, or 3 s after the last send.
            let deadline = monotonicNanoseconds() + 3_000_000_000
            var libraryDeliveries: [[Int: UInt64]] = []
            var floorDeliveries: [[Int: UInt64]] = []
            while true {
                libraryDeliveries = replicas.map(\.deliveries)
                floorDeliveries = replicas.map(\.floorDeliveries)
                let complete =
                    libraryDeliveries.allSatisfy { $0[value] != nil }
                    && floorDeliveries.allSatisfy { $0[value] != nil }
                if complete || monotonicNanoseconds() > deadline { break }
                sleep(nanoseconds: 20_000_000)
            }
            func latencies(_ sent: [Int: UInt64], _ deliveries: [[Int: UInt64]]) -> (samples: [Double], missing: Int) {
                var samples: [Double] = []
                var missing = 0
                for delivered in deliveries {
                    for (value, time) in sent {
                        if let arrival = delivered[value] {
                            samples.append(Double(Int64(bitPattern: arrival &- time)))
                        } else {
                            missing += 1
                        }
                    }
                }
                return (samples, missing)
            }
            let library = latencies(librarySent, libraryDeliveries)
            let floor = latencies(floorSent, floorDeliveries)
            guard !library.samples.isEmpty, !floor.samples.isEmpty else {
                throw Failure(description: "no value was delivered in a round")
            }
            libraryP50.append(percentile(library.samples, 0.5))
            libraryP99.append(percentile(library.samples, 0.99))
            floorP50.append(percentile(floor.samples, 0.5))
            floorP99.append(percentile(floor.samples, 0.99))
            librarySamples += library.samples.count
            floorSamples += floor.samples.count
            libraryMissing += library.missing
            floorMissing += floor.missing
        }

        let measurement = newMeasurement()
        func stats(_ samples: [Double]) -> Stats { Stats(unit: "ns", samples: samples, measurement: measurement) }
        let subject =
            switch delivery {
            case .queue: "WLStorage: set on one replica → onChange on the 2 others, on a queue"
            case .noQueue: "WLStorage: set on one replica → onChange(queue: nil) on the 2 others"
            }
        let baseline =
            "the store's upsert + NOTIFY (value in the payload) by hand → listening connections in the 2 replica processes"
        var note =
            "3 replica processes, \(serverNote); a set (flushInterval 0) every 10 ms, the floor's in between;"
            + " \(librarySamples) and \(floorSamples) deliveries over \(rounds) round(s), median of the rounds'"
            + " percentiles"
        if libraryMissing + floorMissing > 0 {
            note += "; not delivered: \(libraryMissing) of the library's, \(floorMissing) of the floor's"
        }
        let titleSuffix = delivery == .noQueue ? ", handler on the delivering thread" : ""
        return [
            Row(
                caseID: id, title: "PostgreSQL: replica to replica over the loopback, p50\(titleSuffix)",
                subject: subject, value: stats(libraryP50), baseline: baseline, baselineValue: stats(floorP50),
                target: .ratio(atMost: 1.3), note: note),
            Row(
                caseID: id, title: "PostgreSQL: replica to replica over the loopback, p99\(titleSuffix)",
                subject: subject, value: stats(libraryP99), baseline: baseline, baselineValue: stats(floorP99),
                target: .ratio(atMost: 1.5)),
        ]
    }

    // MARK: Flush

    static func flush(_ harness: Harness) -> [Row] {
        let id = "pg-flush"
        guard let cluster = cluster(for: id) else { return [] }
        do {
            return try flush(harness, url: cluster.url)
        } catch {
            return skip(id, error)
        }
    }

    private static func flush(_ harness: Harness, url: String) throws -> [Row] {
        let count = harness.quick ? 100 : 1_000
        let namespace = "bench-flush"
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let storages = (0..<count).map { WLStorage(key: "k\($0)", defaultValue: 0, flushInterval: nil, store: store) }
        // The baseline writes the same keys, in the same table and to the same channel, in a namespace of its own.
        let raw = try RawPostgresConnection(url: url)
        let rawNamespace = "bench-flush-raw"
        let channel = "wlstorage_changes"
        let upsert = HandWrittenSQL.upsert("wlstorage")
        let keys = (0..<count).map { "k\($0)" }
        let payloads = keys.map { "k:\(rawNamespace.utf8.count):\(rawNamespace)\($0)" }
        let encoder = JSONEncoder()

        var (libraryCount, rawCount) = (0, 0)
        var failure: (any Error)?
        var leftPending = false
        let settings =
            harness.quick
            ? RunSettings(rounds: 3, warmUpRounds: 1, roundNanoseconds: 0, maximumOperations: 1)
            : RunSettings(rounds: 15, warmUpRounds: 2, roundNanoseconds: 0, maximumOperations: 1)
        let results = harness.measure(
            [
                Variant(name: "WLStorageSystem.flushAll()") { _ in
                    // Untimed: a new value in every storage, and a pause for the listener to settle.
                    libraryCount += 1
                    for storage in storages { storage.wrappedValue = libraryCount }
                    sleep(nanoseconds: 20_000_000)
                    let start = monotonicNanoseconds()
                    WLStorageSystem.flushAll()
                    let elapsed = monotonicNanoseconds() - start
                    if storages.contains(where: \.hasPendingChanges) { leftPending = true }
                    return elapsed
                },
                Variant(name: "by hand") { _ in
                    rawCount += 1
                    sleep(nanoseconds: 20_000_000)
                    let start = monotonicNanoseconds()
                    do {
                        try raw.execute("BEGIN")
                        for index in 0..<count {
                            try raw.execute(
                                upsert,
                                [
                                    .text(rawNamespace), .text(keys[index]), .bytes(try encoder.encode(rawCount)),
                                    .text(channel), .text(payloads[index]),
                                ])
                        }
                        try raw.execute("COMMIT")
                    } catch {
                        failure = failure ?? error
                    }
                    return monotonicNanoseconds() - start
                },
            ], settings: settings)
        if let failure { throw failure }
        withExtendedLifetime(storages) {}
        var note = "\(serverNote); \(settings.rounds) rounds"
        if leftPending { note += "; values were left pending after flushAll(): the flush failed" }
        return [
            Row(
                caseID: "pg-flush", title: "PostgreSQL: flush of \(count) pending keys",
                subject: "WLStorageSystem.flushAll(), one batch write", value: results["WLStorageSystem.flushAll()"]!,
                baseline: "BEGIN, \(count) upserts + pg_notify by hand (PQexecParams, JSONEncoder), COMMIT",
                baselineValue: results["by hand"]!, target: .ratio(atMost: 1.3), note: note)
        ]
    }

    // MARK: Access

    static func access(_ harness: Harness) -> [Row] {
        let id = "pg-access"
        guard let cluster = cluster(for: id) else { return [] }
        do {
            return try access(harness, url: cluster.url)
        } catch {
            return skip(id, error)
        }
    }

    private static func access(_ harness: Harness, url: String) throws -> [Row] {
        try withTemporaryDirectory("pg-access") { directory in
            let store = try WLStoragePostgresStore(url: url, namespace: "bench-access")
            let postgres = "WLStorage, PostgreSQL store"
            let file = "WLStorage, file store"

            let postgresGet = opaque(WLStorage(key: "get", defaultValue: 0, flushInterval: nil, store: store))
            let fileGet = opaque(AccessCases.intStorage(in: directory, flushInterval: nil))
            let mutex = opaque(MutexBox())
            let gets = harness.measure(
                [
                    Variant(postgres) { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= postgresGet.wrappedValue }
                        blackHole(sum)
                    },
                    Variant(file) { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= fileGet.wrappedValue }
                        blackHole(sum)
                    },
                    Variant("Mutex<Int>") { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= mutex.value.withLock { $0 } }
                        blackHole(sum)
                    },
                ], settings: harness.fast)

            // As in the set case: the first change is written at once, and arms the throttle an hour away, so that
            // every set measured finds a write already scheduled.
            let postgresSet = opaque(WLStorage(key: "set", defaultValue: 0, flushInterval: 3600, store: store))
            postgresSet.wrappedValue = -1
            let fileSet = opaque(
                AccessCases.intStorage(in: directory.appendingPathComponent("set"), flushInterval: 3600))
            fileSet.flush()
            fileSet.wrappedValue = -1
            let observed = opaque(ObservedBox())
            sleep(nanoseconds: 100_000_000)
            let sets = harness.measure(
                [
                    Variant(postgres) { n in
                        for i in 0..<n { postgresSet.wrappedValue = i }
                    },
                    Variant(file) { n in
                        for i in 0..<n { fileSet.wrappedValue = i }
                    },
                    Variant("Observation floor") { n in
                        for i in 0..<n { observed.value = i }
                    },
                ], settings: harness.fast)
            let steady = postgresSet.hasPendingChanges

            let getTitle = "PostgreSQL store: get an Int, uncontended"
            let setTitle = "PostgreSQL store: set an Int, steady state"
            return [
                Row(
                    caseID: "pg-access", title: getTitle, subject: postgres, value: gets[postgres]!,
                    baseline: "Mutex<Int>", baselineValue: gets["Mutex<Int>"]!, target: .ratio(atMost: 2),
                    note: "the get case's target"),
                Row(
                    caseID: "pg-access", title: getTitle, subject: postgres, value: gets[postgres]!, baseline: file,
                    baselineValue: gets[file]!, target: .ratio(atMost: 1.2)),
                Row(
                    caseID: "pg-access", title: setTitle, subject: postgres, value: sets[postgres]!,
                    baseline: "Observation floor", baselineValue: sets["Observation floor"]!,
                    target: .ratio(atMost: 1.3),
                    note: steady ? "the set case's target" : "no write was pending: the steady state was not reached"),
                Row(
                    caseID: "pg-access", title: setTitle, subject: postgres, value: sets[postgres]!, baseline: file,
                    baselineValue: sets[file]!, target: .ratio(atMost: 1.2)),
            ]
        }
    }
}
