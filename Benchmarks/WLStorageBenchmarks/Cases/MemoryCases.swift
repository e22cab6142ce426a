import Foundation
import WLStorage

/// What an idle storage keeps on the heap.
enum MemoryCases {
    static func perInstance(_ harness: Harness) -> [Row] {
        guard HeapUsage.isAvailable else { return [] }
        let count = harness.quick ? 2_000 : 10_000
        return withTemporaryDirectory("memory") { directory in
            // Every key has a file already, so the storages read a value, have nothing pending, and write nothing.
            let keys = (0..<count).map { "k\($0)" }
            let zero = Data("0".utf8)
            for key in keys { try! zero.write(to: directory.appendingPathComponent(key)) }

            var storages: [WLStorage<Int>] = []
            storages.reserveCapacity(count)
            let before = HeapUsage.bytesInUse()
            for key in keys {
                storages.append(
                    WLStorage(
                        defaultValueClosure: { 0 }, flushInterval: nil,
                        backer: WLStorageDefaultBacker(key: key, directory: directory)))
            }
            let after = HeapUsage.bytesInUse()
            precondition(!storages[count - 1].hasPendingChanges)
            blackHole(storages)
            storages.removeAll()
            let file = Row(
                caseID: "memory", title: "memory per idle instance, \(count) instances",
                subject: "WLStorage<Int>", value: Stats(unit: "B", single: Double(after - before) / Double(count)),
                target: .value(atMost: 700, unit: "B"), note: "mallinfo2 before and after, flushInterval nil")
            return [file, customBacker(count: count)]
        }
    }

    /// The same, with a custom backer of the program's own holding each value (the backer's own memory is left out).
    private static func customBacker(count: Int) -> Row {
        let backers = (0..<count).map { IdleBacker(key: "k\($0)") }
        var storages: [WLStorage<Int>] = []
        storages.reserveCapacity(count)
        let before = HeapUsage.bytesInUse()
        for backer in backers {
            storages.append(WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer))
        }
        let after = HeapUsage.bytesInUse()
        precondition(!storages[count - 1].hasPendingChanges)
        blackHole(storages)
        storages.removeAll()
        return Row(
            caseID: "memory", title: "memory per idle instance with a custom backer, \(count) instances",
            subject: "WLStorage<Int>", value: Stats(unit: "B", single: Double(after - before) / Double(count)),
            target: .value(atMost: 700, unit: "B"), note: "mallinfo2 before and after, flushInterval nil")
    }
}

/// A custom backer that holds a value and is never written.
private final class IdleBacker: WLStorageBacker, Sendable {
    let key: String
    init(key: String) { self.key = key }
    func read(defaultValueClosure: () -> Int) -> Int { 1 }
    func write(value: Int) {}
}
