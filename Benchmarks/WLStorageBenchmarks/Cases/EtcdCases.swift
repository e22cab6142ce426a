import Foundation
import WLStorage
import WLStorageEtcd

/// The etcd store against etcd's JSON gateway used by hand (``RawEtcdClient``, ``RawEtcdWatch``), on a throwaway
/// single-member server over the loopback (``BenchmarkEtcd``).
enum EtcdCases {
    /// The server, or `nil` after saying why the case is skipped.
    static func server(for id: String) -> BenchmarkEtcd? {
        switch BenchmarkEtcd.shared {
        case .success(let server):
            return server
        case .failure(let failure):
            _ = PostgresCases.skip(id, failure)
            return nil
        }
    }

    static let serverNote =
        "a single-member etcd 3.4 over 127.0.0.1 (HTTP/1.1 JSON gateway), its log written with fsync"

    // MARK: Propagation

    static func propagation(_ harness: Harness) -> [Row] {
        let id = "etcd-propagation"
        guard let server = server(for: id) else { return [] }
        do {
            return try propagation(harness, endpoint: server.endpoint)
        } catch {
            return PostgresCases.skip(id, error)
        }
    }

    private static func propagation(_ harness: Harness, endpoint: String) throws -> [Row] {
        let id = "etcd-propagation"
        let rounds = harness.quick ? 1 : 3
        let sendsPerRound = harness.quick ? 30 : 300
        // One send every 5 ms, the library's and the floor's in turn: each side sends every 10 ms.
        let period: UInt64 = 5_000_000
        let namespace = "bench-propagation"
        let key = "value"
        // The floor's key, outside the store's keys, as long as the store's etcd key.
        let floorKey = "wlstorage/bench-floorgation/value"

        // The floor: a put by hand on a connection kept open, heard by a watch read by hand in each replica process
        // (the ones measured) and in this one, as the writing storage's own watch is.
        let writer = try RawEtcdClient(endpoint: endpoint)
        let listener = try RawEtcdWatch(endpoint: endpoint, key: floorKey)
        func floorSend(_ value: Int) throws {
            try writer.put(floorKey, String(value))
        }

        // The library: this process's storage, whose every set is written at once (flushInterval 0), and two others.
        let store = try WLStorageEtcdStore(endpoints: [endpoint], namespace: namespace)
        let storage = WLStorage(key: key, defaultValue: 0, flushInterval: 0, store: store)
        let replicas = try (0..<2).map { _ in
            try ReplicaProcess(
                arguments: [EtcdReplicaMode.flag, endpoint, namespace, key, floorKey], hearsFloor: true)
        }
        defer { for replica in replicas { replica.stop() } }

        // Warm-up: negative values until every replica and the listener has received one, then 20 more of each.
        var value = 0
        var extra = 20
        let deadline = monotonicNanoseconds() + 60_000_000_000
        while extra > 0 {
            value -= 1
            storage.wrappedValue = value
            try floorSend(value)
            sleep(nanoseconds: 2 * period)
            let everyone =
                replicas.allSatisfy {
                    $0.deliveries.keys.contains { $0 < 0 } && $0.floorDeliveries.keys.contains { $0 < 0 }
                } && listener.received.withLock { !$0.isEmpty }
            if everyone {
                extra -= 1
            } else if monotonicNanoseconds() > deadline || !replicas.allSatisfy(\.isRunning) {
                throw PostgresCases.Failure(description: "the replicas did not receive the warm-up values within 60 s")
            }
        }

        var libraryP50: [Double] = []
        var libraryP99: [Double] = []
        var floorP50: [Double] = []
        var floorP99: [Double] = []
        var (librarySamples, floorSamples, libraryMissing, floorMissing) = (0, 0, 0, 0)
        value = 0
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
                    libraryDeliveries.allSatisfy { $0[value] != nil } && floorDeliveries.allSatisfy { $0[value] != nil }
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
                throw PostgresCases.Failure(description: "no value was delivered in a round")
            }
            libraryP50.append(PostgresCases.percentile(library.samples, 0.5))
            libraryP99.append(PostgresCases.percentile(library.samples, 0.99))
            floorP50.append(PostgresCases.percentile(floor.samples, 0.5))
            floorP99.append(PostgresCases.percentile(floor.samples, 0.99))
            librarySamples += library.samples.count
            floorSamples += floor.samples.count
            libraryMissing += library.missing
            floorMissing += floor.missing
        }
        withExtendedLifetime(listener) {}

        let measurement = newMeasurement()
        func stats(_ samples: [Double]) -> Stats { Stats(unit: "ns", samples: samples, measurement: measurement) }
        let subject = "WLStorage: set on one replica → onChange on the 2 others, on a queue"
        let baseline =
            "a put by hand (one libcurl call, connection kept) → watches read by hand in the 2 replica processes"
        var note =
            "3 replica processes, \(serverNote); a set (flushInterval 0) every 10 ms, the floor's in between;"
            + " \(librarySamples) and \(floorSamples) deliveries over \(rounds) round(s), median of the rounds'"
            + " percentiles"
        if libraryMissing + floorMissing > 0 {
            note += "; not delivered: \(libraryMissing) of the library's, \(floorMissing) of the floor's"
        }
        return [
            Row(
                caseID: id, title: "etcd: replica to replica over the loopback, p50", subject: subject,
                value: stats(libraryP50), baseline: baseline, baselineValue: stats(floorP50),
                target: .ratio(atMost: 1.3), note: note),
            Row(
                caseID: id, title: "etcd: replica to replica over the loopback, p99", subject: subject,
                value: stats(libraryP99), baseline: baseline, baselineValue: stats(floorP99),
                target: .ratio(atMost: 1.5)),
        ]
    }

    // MARK: Batch

    static func batch(_ harness: Harness) -> [Row] {
        let id = "etcd-batch"
        guard let server = server(for: id) else { return [] }
        do {
            return try batch(harness, endpoint: server.endpoint)
        } catch {
            return PostgresCases.skip(id, error)
        }
    }

    /// The transactions of puts a batch of `count` keys is sent as, written by hand: 128 puts each (etcd's default
    /// `--max-txn-ops`), the value of every key `value`; JSON built as text, keys and values in Base64.
    static func transactions(keys: [String], value: Int) -> [Data] {
        let encoded = Data(String(value).utf8).base64EncodedString()
        return stride(from: 0, to: keys.count, by: 128).map { start in
            var body = #"{"compare":[],"success":["#
            for (index, key) in keys[start..<min(start + 128, keys.count)].enumerated() {
                if index > 0 { body += "," }
                body += #"{"request_put":{"key":""# + key + #"","value":""# + encoded + #""}}"#
            }
            body += "]}"
            return Data(body.utf8)
        }
    }

    private static func batch(_ harness: Harness, endpoint: String) throws -> [Row] {
        let count = 1_000
        let store = try WLStorageEtcdStore(endpoints: [endpoint], namespace: "bench-batch")
        let storages = (0..<count).map { WLStorage(key: "k\($0)", defaultValue: 0, flushInterval: nil, store: store) }
        WLStorageSystem.flushAll()
        // The store's batch alone, without the storages.
        let direct = try WLStorageEtcdStore(endpoints: [endpoint], namespace: "bench-batch-direct")
        let raw = try RawEtcdClient(endpoint: endpoint)
        let rawKeys = (0..<count).map { Data("wlstorage/bench-batch-raw/k\($0)".utf8).base64EncodedString() }
        // The floor of the flush: the same transactions by hand in a namespace a watch follows, as the storages' feed
        // follows theirs (etcd sends each write of the batch to the watch too, on the same cores).
        _ = try RawEtcdWatch(endpoint: endpoint, key: "wlstorage/bench-batch-watched/", prefix: true)
        let watchedKeys = (0..<count).map { Data("wlstorage/bench-batch-watched/k\($0)".utf8).base64EncodedString() }
        var (libraryCount, directCount, rawCount, watchedCount) = (0, 0, 0, 0)
        var failure: (any Error)?
        var leftPending = false
        // Between rounds, a pause in which the store's watch reports its own writes and each storage reads its key
        // back (a thousand reads): the next round does not run beside them.
        let pause: UInt64 = 3_000_000_000
        let settings =
            harness.quick
            ? RunSettings(rounds: 3, warmUpRounds: 1, roundNanoseconds: 0, maximumOperations: 1)
            : RunSettings(rounds: 9, warmUpRounds: 1, roundNanoseconds: 0, maximumOperations: 1)
        /// The time of the transactions by hand of `keys` (etcd keys in Base64), each key holding `value`, after the pause.
        func byHand(_ keys: [String], _ value: Int) -> UInt64 {
            sleep(nanoseconds: pause)
            let start = monotonicNanoseconds()
            do {
                for transaction in transactions(keys: keys, value: value) { try raw.post("v3/kv/txn", transaction) }
            } catch {
                failure = failure ?? error
            }
            return monotonicNanoseconds() - start
        }
        let results = harness.measure(
            [
                Variant(name: "WLStorageSystem.flushAll()") { _ in
                    libraryCount += 1
                    for storage in storages { storage.wrappedValue = libraryCount }
                    sleep(nanoseconds: pause)
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
                    sleep(nanoseconds: pause)
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
                    return byHand(rawKeys, rawCount)
                },
                Variant(name: "by hand, watched") { _ in
                    watchedCount += 1
                    return byHand(watchedKeys, watchedCount)
                },
            ], settings: settings)
        if let failure { throw failure }
        withExtendedLifetime(storages) {}
        var note = "\(serverNote); \(settings.rounds) rounds"
        if leftPending { note += "; values were left pending after flushAll(): the flush failed" }
        let baseline = "the same keys by hand: transactions of 128 puts, JSON built as text, one connection kept"
        let watched = "the same keys by hand, as below, in a namespace a watch follows (as the storages' feed does)"
        return [
            Row(
                caseID: "etcd-batch", title: "etcd: flush of \(count) pending keys",
                subject: "WLStorageSystem.flushAll(): transactions of up to 128 puts",
                value: results["WLStorageSystem.flushAll()"]!, baseline: watched,
                baselineValue: results["by hand, watched"]!, target: .ratio(atMost: 1.2), note: note),
            Row(
                caseID: "etcd-batch", title: "etcd: flush of \(count) pending keys, against an unwatched namespace",
                subject: "WLStorageSystem.flushAll(), as above", value: results["WLStorageSystem.flushAll()"]!,
                baseline: baseline, baselineValue: results["by hand"]!, note: note),
            Row(
                caseID: "etcd-batch", title: "etcd: batch of \(count) writes",
                subject: "WLStorageEtcdStore.write(_:) alone, without storages",
                value: results["store.write(batch)"]!, baseline: baseline, baselineValue: results["by hand"]!,
                note: note),
        ]
    }
}
