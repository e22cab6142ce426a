import Foundation
import Synchronization
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A few settings, as a program keeps them: what the load case stores under each key.
struct SampleSettings: Codable, Sendable, Equatable {
    var name: String
    var count: Int
    var enabled: Bool
}

/// A backer that keeps nothing and notes when each write happened, and of which value.
final class CountingBacker: WLStorageBacker, Sendable {
    let key = "burst"
    let writes = Mutex<[(time: UInt64, value: Int)]>([])

    /// Something is stored already, so that creating the storage writes nothing.
    func read(defaultValueClosure: () -> Int) -> Int { 0 }

    func write(value: Int) {
        let time = monotonicNanoseconds()
        writes.withLock { $0.append((time, value)) }
    }
}

/// Everything that reaches a backer: flushing, loading, and how often a burst of sets writes.
enum DiskCases {
    static func flush(_ harness: Harness) -> [Row] {
        var rows: [Row] = []
        for (label, size) in [("100 B", 100), ("100 KB", 102_400)] {
            // Two strings whose JSON is `size` bytes each; the sets alternate, so every flush writes a change.
            let values = ["a", "b"].map { String(repeating: $0, count: size - 2) }
            precondition(try! JSONEncoder().encode(values[0]).count == size)
            rows += flushRows(harness, of: "a \(label) value", alternating: values, target: 1.15)
        }
        // A value stored as a JSON object is written as the fields it changed: the write reads the file first, to
        // learn whether another program replaced it since.
        let settings = [true, false].map { SampleSettings(name: "window", count: 42, enabled: $0) }
        rows += flushRows(harness, of: "a settings object (about 50 B)", alternating: settings, target: 1.3)
        return rows
    }

    /// Rows of a flush of each of `values` in turn, set on a storage of a directory, against the raw durable sequence
    /// (and against `Data.write(.atomic)`) writing the same values encoded.
    private static func flushRows<Value: Codable & Sendable>(
        _ harness: Harness, of what: String, alternating values: [Value], target: Double
    ) -> [Row] {
        withTemporaryDirectory("flush") { directory in
            let encoder = JSONEncoder()
            let storage = WLStorage<Value>(
                defaultValueClosure: { values[1] }, flushInterval: nil,
                backer: WLStorageDefaultBacker(key: "value", directory: directory))
            storage.flush()
            let descriptor = openDirectory(directory)
            defer { close(descriptor) }
            let raw = RawDurableWriter(directory: descriptor, name: "raw")
            let atomicURL = directory.appendingPathComponent("atomic")
            // Rounds of one operation each: a counter per variant, not the loop index, alternates the values.
            var (storageCount, rawCount, atomicCount) = (0, 0, 0)
            let results = harness.measure(
                [
                    Variant("WLStorage") { n in
                        for _ in 0..<n {
                            storageCount += 1
                            storage.wrappedValue = values[storageCount & 1]
                            storage.flush()
                        }
                    },
                    Variant("raw") { n in
                        for _ in 0..<n {
                            rawCount += 1
                            raw.write(try! encoder.encode(values[rawCount & 1]))
                        }
                    },
                    Variant("atomic") { n in
                        for _ in 0..<n {
                            atomicCount += 1
                            try! encoder.encode(values[atomicCount & 1]).write(to: atomicURL, options: .atomic)
                        }
                    },
                ], settings: harness.disk)
            let title = "flush of \(what)"
            return [
                Row(
                    caseID: "flush", title: title, subject: "WLStorage set + flush()", value: results["WLStorage"]!,
                    baseline: "raw durable sequence + encoding", baselineValue: results["raw"]!,
                    target: .ratio(atMost: target)),
                Row(
                    caseID: "flush", title: title, subject: "WLStorage set + flush()", value: results["WLStorage"]!,
                    baseline: "encoding + Data.write(.atomic)", baselineValue: results["atomic"]!),
            ]
        }
    }

    static func load(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("load") { directory in
            let keys = (0..<1_000).map { "key-\($0)" }
            let encoder = JSONEncoder()
            for (index, key) in keys.enumerated() {
                let value = SampleSettings(name: "item \(index)", count: index, enabled: index % 2 == 0)
                try! encoder.encode(value).write(to: directory.appendingPathComponent(key))
            }
            let fallback = SampleSettings(name: "", count: -1, enabled: false)

            let results = harness.measure(
                [
                    Variant(name: "WLStorage") { n in
                        var total: UInt64 = 0
                        for _ in 0..<n {
                            // The directory is prepared anew in each round: its last storage went with the round before.
                            var storages: [WLStorage<SampleSettings>] = []
                            storages.reserveCapacity(keys.count)
                            let start = monotonicNanoseconds()
                            for key in keys {
                                storages.append(
                                    WLStorage(
                                        defaultValueClosure: { fallback },
                                        backer: WLStorageDefaultBacker(key: key, directory: directory)))
                            }
                            total += monotonicNanoseconds() - start
                            precondition(storages[keys.count - 1].wrappedValue.count == keys.count - 1)
                        }
                        return total
                    },
                    Variant(name: "raw") { n in
                        var total: UInt64 = 0
                        for _ in 0..<n {
                            var values: [SampleSettings] = []
                            values.reserveCapacity(keys.count)
                            let start = monotonicNanoseconds()
                            let descriptor = openDirectory(directory)
                            let decoder = JSONDecoder()
                            for key in keys {
                                let data = rawRead(directory: descriptor, name: key)
                                values.append(try! decoder.decode(SampleSettings.self, from: data))
                            }
                            close(descriptor)
                            total += monotonicNanoseconds() - start
                            precondition(values[keys.count - 1].count == keys.count - 1)
                        }
                        return total
                    },
                ], settings: harness.disk)
            return [
                Row(
                    caseID: "load", title: "load 1,000 keys at start", subject: "WLStorage init ×1,000",
                    value: results["WLStorage"]!, baseline: "raw open, read and decode",
                    baselineValue: results["raw"]!, target: .ratio(atMost: 1.5))
            ]
        }
    }

    static func writeBurst(_ harness: Harness) -> [Row] {
        let backer = CountingBacker()
        let storage = WLStorage<Int>(defaultValueClosure: { 0 }, flushInterval: 1, backer: backer)
        let interval: UInt64 = 1_000_000_000
        let burst: UInt64 = harness.quick ? 350_000_000 : 1_100_000_000
        let start = monotonicNanoseconds()
        var end = start
        var value = 0
        while end - start < burst {
            for _ in 0..<1_000 {
                value += 1
                storage.wrappedValue = value
            }
            end = monotonicNanoseconds()
        }
        let during = backer.writes.withLock { writes in writes.filter { $0.time >= start && $0.time < end }.count }
        storage.flush()
        let lastWritten = backer.writes.withLock { $0.last?.value }
        let allowed = 1 + Double(burst / interval)
        var note = "\(value) sets; after flush() the last value is written: \(lastWritten == value ? "yes" : "NO")"
        if harness.quick { note += "; shortened to 0.35 s by --quick" }
        return [
            Row(
                caseID: "burst", title: "backer writes during a \(Double(burst) / 1e9) s burst of sets, interval 1",
                subject: "writes", value: Stats(unit: "count", single: Double(during)),
                target: .value(atMost: allowed, unit: "count"), note: note)
        ]
    }
}
