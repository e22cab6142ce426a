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
            return [
                Row(
                    caseID: "memory", title: "memory per idle instance, \(count) instances",
                    subject: "WLStorage<Int>", value: Stats(unit: "B", single: Double(after - before) / Double(count)),
                    target: .value(atMost: 700, unit: "B"), note: "mallinfo2 before and after, flushInterval nil")
            ]
        }
    }
}
