import Foundation
import WLStorage
import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One writer and many replicas: how long a change takes to reach all of them, and what each write costs the server,
/// as the number of replicas grows, against the same curve of a notification sent by hand.
enum FanOutCases {
    static func fanOut(_ harness: Harness) -> [Row] {
        let id = "pg-fanout"
        guard let cluster = PostgresCases.cluster(for: id) else { return [] }
        do {
            var rows: [Row] = []
            for count in harness.quick ? [3] : [3, 10, 30] {
                rows += try fanOut(harness, cluster: cluster, replicas: count)
            }
            return rows
        } catch {
            return PostgresCases.skip(id, error)
        }
    }

    /// The CPU time the server's processes (the postmaster and its children: the connections' backends and the
    /// background workers) have used so far, in nanoseconds, from `/proc/PID/schedstat`.
    static func serverCPU(_ cluster: BenchmarkCluster) -> UInt64? {
        let pidFile = cluster.directory.appendingPathComponent("data/postmaster.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
            let postmaster = text.split(separator: "\n").first.flatMap({ Int32($0) }),
            let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc")
        else { return nil }
        var total: UInt64 = 0
        for entry in entries {
            guard let pid = Int32(entry) else { continue }
            if pid != postmaster {
                // The parent's PID is the fourth field of /proc/PID/stat, after the name in parentheses.
                guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                    let close = stat.lastIndex(of: ")")
                else { continue }
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                guard fields.count > 2, Int32(fields[1]) == postmaster else { continue }
            }
            guard let schedstat = try? String(contentsOfFile: "/proc/\(pid)/schedstat", encoding: .utf8),
                let onCPU = schedstat.split(separator: " ").first.flatMap({ UInt64($0) })
            else { continue }
            total += onCPU
        }
        return total
    }

    private static func fanOut(_ harness: Harness, cluster: BenchmarkCluster, replicas count: Int) throws -> [Row] {
        let url = cluster.url
        let rounds = harness.quick ? 1 : 3
        let sendsPerPhase = harness.quick ? 20 : 100
        let period: UInt64 = 10_000_000
        let namespace = "bench-fanout-\(count)"
        let key = "value"

        let floorTable = "wlstorage_fanout_floor"
        let floorChannel = floorTable + "_changes"
        let writer = try RawPostgresConnection(url: url)
        try writer.execute(HandWrittenSQL.createTable(floorTable))
        let upsert = HandWrittenSQL.upsertCarryingValue(floorTable)
        // The store's payload for the key, with the floor's table: the notification is as long as the store's.
        let payload = "*:\(namespace.utf8.count):\(namespace)c\(key.utf8.count):\(key)"
        let listeners = try (0..<count).map { _ in try FloorListener(url: url, channel: floorChannel) }
        defer { for listener in listeners { listener.stop() } }
        func floorSend(_ value: Int) throws {
            try writer.execute(
                upsert,
                [
                    .text(namespace), .text(key), .bytes(Data(String(value).utf8)), .text(floorChannel),
                    .text(payload),
                ])
        }

        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let storage = WLStorage(key: key, defaultValue: 0, flushInterval: 0, store: store)
        let replicas = try (0..<count).map { _ in try ReplicaProcess(url: url, namespace: namespace, key: key) }
        defer { for replica in replicas { replica.stop() } }

        // Warm-up: negative values until every replica and listener has received one, then 10 more of each.
        try warmUp(
            storage, replicas: replicas, listeners: listeners, period: period, extra: 10, seconds: 120,
            floorSend: floorSend)

        struct Phase {
            var p50: [Double] = []
            var p99: [Double] = []
            var cpu: [Double] = []
            var samples = 0
            var missing = 0
        }
        var library = Phase()
        var floor = Phase()
        var value = 0
        // Phases of one side at a time, so that the server's CPU time is one side's; the sides take turns, round by
        // round, each with every listener of both in place.
        for _ in 0..<rounds {
            for side in 0..<2 {
                let before = serverCPU(cluster)
                var sent: [Int: UInt64] = [:]
                var next = monotonicNanoseconds()
                for _ in 0..<sendsPerPhase {
                    sleep(until: next)
                    next += period
                    value += 1
                    sent[value] = monotonicNanoseconds()
                    if side == 0 { storage.wrappedValue = value } else { try floorSend(value) }
                }
                let deadline = monotonicNanoseconds() + 3_000_000_000
                var deliveries: [[Int: UInt64]] = []
                while true {
                    deliveries =
                        side == 0 ? replicas.map(\.deliveries) : listeners.map { $0.received.withLock { $0 } }
                    if deliveries.allSatisfy({ $0[value] != nil }) || monotonicNanoseconds() > deadline { break }
                    sleep(nanoseconds: 10_000_000)
                }
                let after = serverCPU(cluster)
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
                guard !samples.isEmpty else {
                    throw PostgresCases.Failure(description: "no value reached the \(count) replicas in a round")
                }
                var phase = side == 0 ? library : floor
                phase.p50.append(PostgresCases.percentile(samples, 0.5))
                phase.p99.append(PostgresCases.percentile(samples, 0.99))
                if let before, let after { phase.cpu.append(Double(after - before) / Double(sendsPerPhase)) }
                phase.samples += samples.count
                phase.missing += missing
                if side == 0 { library = phase } else { floor = phase }
            }
        }

        let measurement = newMeasurement()
        func stats(_ samples: [Double]) -> Stats { Stats(unit: "ns", samples: samples, measurement: measurement) }
        let subject = "WLStorage: set on the writer → onChange on each of \(count) replica processes"
        let baseline = "the store's upsert + NOTIFY (value in the payload) by hand → \(count) listening connections"
        var note =
            "\(PostgresCases.serverNote); one write every 10 ms, \(sendsPerPhase) per phase, the sides' phases in turn"
            + " over \(rounds) round(s); \(library.samples) and \(floor.samples) deliveries; median of the rounds'"
            + " percentiles"
        if library.missing + floor.missing > 0 {
            note += "; not delivered: \(library.missing) of the library's, \(floor.missing) of the floor's"
        }
        var rows = [
            Row(
                caseID: "pg-fanout", title: "PostgreSQL: one writer to \(count) replicas, p50", subject: subject,
                value: stats(library.p50), baseline: baseline, baselineValue: stats(floor.p50), note: note),
            Row(
                caseID: "pg-fanout", title: "PostgreSQL: one writer to \(count) replicas, p99", subject: subject,
                value: stats(library.p99), baseline: baseline, baselineValue: stats(floor.p99)),
        ]
        if !library.cpu.isEmpty, !floor.cpu.isEmpty {
            rows.append(
                Row(
                    caseID: "pg-fanout", title: "PostgreSQL: server CPU time per write, \(count) replicas",
                    subject: "WLStorage set (upsert + notification, and whatever the replicas ask)",
                    value: stats(library.cpu), baseline: "upsert + NOTIFY by hand", baselineValue: stats(floor.cpu),
                    note: "every process of the server, from /proc/PID/schedstat, over each phase"))
        }
        return rows
    }
}
