import Dispatch
import Foundation
import WLStorage
import WLStorageFiles

/// Gets and sets of the value in memory, called from this module as users call them, and naming a file.
enum AccessCases {
    /// A storage of an `Int` in `directory`, with nothing stored yet.
    static func intStorage(in directory: URL, flushInterval: Int?) -> WLStorage<Int> {
        WLStorage(
            defaultValueClosure: { 0 }, flushInterval: flushInterval,
            backer: WLStorageDefaultBacker(key: "int", directory: directory))
    }

    /// A storage of an `Int` with a backer of the program's own, which keeps nothing.
    static func customBackerStorage(flushInterval: Int?) -> WLStorage<Int> {
        WLStorage(defaultValueClosure: { 0 }, flushInterval: flushInterval, backer: DiscardingBacker())
    }

    static func get(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("get") { directory in
            let storage = opaque(intStorage(in: directory, flushInterval: nil))
            let custom = opaque(customBackerStorage(flushInterval: nil))
            let mutex = opaque(MutexBox())
            let queue = opaque(SerialQueueBox())
            let observed = opaque(ObservedBox())
            let results = harness.measure(
                [
                    Variant("WLStorage") { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= storage.wrappedValue }
                        blackHole(sum)
                    },
                    Variant("WLStorage, custom backer") { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= custom.wrappedValue }
                        blackHole(sum)
                    },
                    Variant("Observation floor") { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= observed.value }
                        blackHole(sum)
                    },
                    Variant("Mutex<Int>") { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= mutex.value.withLock { $0 } }
                        blackHole(sum)
                    },
                    Variant("serial DispatchQueue.sync") { n in
                        var sum = 0
                        for _ in 0..<n { sum &+= queue.value }
                        blackHole(sum)
                    },
                ], settings: harness.fast)
            let title = "get an Int, uncontended"
            return [
                Row(
                    caseID: "get", title: title, subject: "WLStorage", value: results["WLStorage"]!,
                    baseline: "Mutex<Int>", baselineValue: results["Mutex<Int>"]!, target: .ratio(atMost: 2)),
                Row(
                    caseID: "get", title: title, subject: "WLStorage", value: results["WLStorage"]!,
                    baseline: "Observation floor", baselineValue: results["Observation floor"]!,
                    target: .ratio(atMost: 1.3), guards: true),
                Row(
                    caseID: "get", title: title, subject: "WLStorage, custom backer",
                    value: results["WLStorage, custom backer"]!, baseline: "Observation floor",
                    baselineValue: results["Observation floor"]!, target: .ratio(atMost: 1.3), guards: true),
                Row(
                    caseID: "get", title: title, subject: "WLStorage", value: results["WLStorage"]!,
                    baseline: "serial DispatchQueue.sync", baselineValue: results["serial DispatchQueue.sync"]!),
            ]
        }
    }

    static func set(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("set") { directory in
            // The default is written at once; after that write, one set arms a tick an hour away, so every set
            // measured below finds a write already scheduled.
            let storage = opaque(intStorage(in: directory, flushInterval: 3600))
            storage.flush()
            storage.wrappedValue = -1
            let custom = opaque(customBackerStorage(flushInterval: 3600))
            custom.flush()
            custom.wrappedValue = -1
            let mutex = opaque(MutexBox())
            let queue = opaque(SerialQueueBox())
            let observed = opaque(ObservedBox())
            let results = harness.measure(
                [
                    Variant("WLStorage") { n in
                        for i in 0..<n { storage.wrappedValue = i }
                    },
                    Variant("WLStorage, custom backer") { n in
                        for i in 0..<n { custom.wrappedValue = i }
                    },
                    Variant("Mutex<Int>") { n in
                        for i in 0..<n { mutex.value.withLock { $0 = i } }
                    },
                    Variant("serial DispatchQueue.sync") { n in
                        for i in 0..<n { queue.value = i }
                    },
                    Variant("Observation floor") { n in
                        for i in 0..<n { observed.value = i }
                    },
                ], settings: harness.fast)

            let sets = harness.quick ? 100_000 : 1_000_000
            let heapBefore = HeapUsage.bytesInUse()
            for i in 0..<sets { storage.wrappedValue = i }
            let heapAfter = HeapUsage.bytesInUse()
            let pending = storage.hasPendingChanges

            let title = "set an Int, steady state"
            let value = results["WLStorage"]!
            var rows = [
                Row(
                    caseID: "set", title: title, subject: "WLStorage", value: value,
                    baseline: "Observation floor", baselineValue: results["Observation floor"]!,
                    target: .ratio(atMost: 1.3),
                    note: pending ? nil : "no write was pending: the steady state was not reached", guards: true),
                Row(
                    caseID: "set", title: title, subject: "WLStorage, custom backer",
                    value: results["WLStorage, custom backer"]!, baseline: "Observation floor",
                    baselineValue: results["Observation floor"]!, target: .ratio(atMost: 1.3),
                    note: custom.hasPendingChanges ? nil : "no write was pending: the steady state was not reached",
                    guards: true),
                Row(
                    caseID: "set", title: title, subject: "WLStorage", value: value, baseline: "Mutex<Int>",
                    baselineValue: results["Mutex<Int>"]!),
                Row(
                    caseID: "set", title: title, subject: "WLStorage", value: value,
                    baseline: "serial DispatchQueue.sync", baselineValue: results["serial DispatchQueue.sync"]!),
            ]
            if HeapUsage.isAvailable {
                rows.append(
                    Row(
                        caseID: "set", title: "set: heap bytes kept per set", subject: "WLStorage, \(sets) sets",
                        value: Stats(unit: "B", single: Double(heapAfter - heapBefore) / Double(sets)),
                        target: .value(atMost: 0.01, unit: "B"),
                        note: "mallinfo2 before and after; it sees memory kept, not a malloc and free within one set"))
            }
            return rows
        }
    }

    /// `update { $0 += 1 }`, against what a program would do without it: a get and a set of the same storage under a
    /// lock of its own (atomic only among the program's callers that take that lock); and against a set alone and a
    /// `Mutex<Int>` incremented under its lock.
    static func update(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("update") { directory in
            let storage = opaque(intStorage(in: directory, flushInterval: 3600))
            storage.flush()
            storage.wrappedValue = -1
            let mutex = opaque(MutexBox())
            let lock = opaque(MutexBox())
            let results = harness.measure(
                [
                    Variant("WLStorage update") { n in
                        for _ in 0..<n { storage.update { $0 &+= 1 } }
                    },
                    Variant("WLStorage set") { n in
                        for i in 0..<n { storage.wrappedValue = i }
                    },
                    Variant("Mutex<Int> increment") { n in
                        for _ in 0..<n { mutex.value.withLock { $0 &+= 1 } }
                    },
                    Variant("get and set under a Mutex") { n in
                        for _ in 0..<n { lock.value.withLock { _ in storage.wrappedValue &+= 1 } }
                    },
                ], settings: harness.fast)
            let title = "update an Int (+= 1), uncontended"
            let value = results["WLStorage update"]!
            return [
                Row(
                    caseID: "update", title: title, subject: "WLStorage update", value: value,
                    baseline: "get and set under a Mutex", baselineValue: results["get and set under a Mutex"]!,
                    target: .ratio(atMost: 2), guards: true),
                Row(
                    caseID: "update", title: title, subject: "WLStorage update", value: value,
                    baseline: "WLStorage set", baselineValue: results["WLStorage set"]!),
                Row(
                    caseID: "update", title: title, subject: "WLStorage update", value: value,
                    baseline: "Mutex<Int> increment", baselineValue: results["Mutex<Int> increment"]!),
            ]
        }
    }

    static func contendedGet(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("contended") { directory in
            let storage = opaque(intStorage(in: directory, flushInterval: nil))
            let mutex = opaque(MutexBox())
            // Each of two threads does `n` gets at the same time; the time per get is the wall time over `n`.
            let results = harness.measure(
                [
                    Variant("WLStorage") { n in
                        DispatchQueue.concurrentPerform(iterations: 2) { _ in
                            var sum = 0
                            for _ in 0..<n { sum &+= storage.wrappedValue }
                            blackHole(sum)
                        }
                    },
                    Variant("Mutex<Int>") { n in
                        DispatchQueue.concurrentPerform(iterations: 2) { _ in
                            var sum = 0
                            for _ in 0..<n { sum &+= mutex.value.withLock { $0 } }
                            blackHole(sum)
                        }
                    },
                ], settings: harness.fast)
            return [
                Row(
                    caseID: "contended", title: "get with two threads contending", subject: "WLStorage",
                    value: results["WLStorage"]!, baseline: "Mutex<Int>, same contention",
                    baselineValue: results["Mutex<Int>"]!, target: .ratio(atMost: 2))
            ]
        }
    }

    static func fileName(_ harness: Harness) -> [Row] {
        let key = opaque("user/settings:1")
        let results = harness.measure(
            [
                Variant("FileName.forKey") { n in
                    var sum = 0
                    for _ in 0..<n { sum &+= FileName.forKey(key)?.utf8.count ?? 0 }
                    blackHole(sum)
                }
            ], settings: harness.fast)
        return [
            Row(
                caseID: "filename", title: "file name for an unsafe key (SHA-256 hex)",
                subject: "FileName.forKey(\"user/settings:1\")", value: results["FileName.forKey"]!,
                target: .value(atMost: 1_000, unit: "ns"))
        ]
    }
}

/// A backer of the program's own that keeps nothing: what a get and a set cost through the storage, with no file.
final class DiscardingBacker: WLStorageBacker, Sendable {
    let key = "discarded"
    func read(defaultValueClosure: () -> Int) -> Int { defaultValueClosure() }
    func write(value: Int) {}
}
