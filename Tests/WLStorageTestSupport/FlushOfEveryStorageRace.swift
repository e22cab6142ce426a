import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

private struct RacedJob: Codable, Sendable, Equatable {
    var set = 0
    var count = 0
    var other = 0
}

/// Flushes of every storage racing sets, updates and another program's writes, over any store that writes on condition.
public enum FlushOfEveryStorageRace {
    /// Two threads flush every storage of `store` over and over while a third sets one field of each of `keys` objects
    /// and increments another with `update`, and another program (`outside`, another handle of the same values) sets a
    /// third with writes on condition: every object ends with the last set, every increment once, and the other
    /// program's last value, and each storage holds what is stored.
    public static func twoFlushesAtOnceBesideSetsAndUpdatesKeepEveryChange(
        store: any WLStorageStore, outside: any WLStorageConditionalStore, keys: [String], rounds: Int
    ) throws {
        for key in keys { try outside.write(key: key, data: Data(#"{"count":0,"other":0,"set":0}"#.utf8)) }
        let storages = keys.map { WLStorage(key: $0, defaultValue: RacedJob(), flushInterval: nil, store: store) }
        #expect(eventually(timeout: 60) { storages.allSatisfy { $0.wrappedValue == RacedJob() } })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        let changing = Atomic<Bool>(true)
        let flushes = (0..<2).map { _ in
            startThread {
                while changing.load(ordering: .acquiring) { flushAllStores([store]) }
            }
        }
        let otherProgram = startThread {
            for round in 1...rounds {
                for (index, key) in keys.enumerated() where index % 4 == round % 4 || round == rounds {
                    // Read, change `other`, write while the key still holds what was read: another program's update.
                    for _ in 0..<10_000 {
                        guard let data = try? outside.read(key: key),
                            var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
                        else { continue }
                        object["other"] = round
                        let bytes = try! JSONSerialization.data(withJSONObject: object, options: .sortedKeys)
                        if (try? outside.write(key: key, data: bytes, ifItHolds: data)) == true { break }
                    }
                }
            }
        }
        for round in 1...rounds {
            for (index, storage) in storages.enumerated() where (index + round) % 3 != 0 || round == rounds {
                storage.wrappedValue.set = round
                storage.update { $0.count += 1 }
            }
        }
        #expect(otherProgram.wait(timeout: .now() + 300) == .success)
        changing.store(false, ordering: .releasing)
        for flush in flushes { #expect(flush.wait(timeout: .now() + 300) == .success) }
        #expect(
            eventually(timeout: 120) {
                flushAllStores([store])
                return storages.allSatisfy { !$0.hasPendingChanges }
            }, "\(storages.compactMap(\.lastError).prefix(3))")
        for (index, key) in keys.enumerated() {
            let updates = (1...rounds).filter { (index + $0) % 3 != 0 || $0 == rounds }.count
            let data = try #require(try outside.read(key: key))
            let object = try JSONDecoder().decode(RacedJob.self, from: data)
            #expect(object == RacedJob(set: rounds, count: updates, other: rounds), "\(key)")
            #expect(eventually(timeout: 60) { storages[index].wrappedValue == object }, "\(key)")
        }
    }
}
