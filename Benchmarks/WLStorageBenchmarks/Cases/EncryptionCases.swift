import Foundation
import WLStorage

/// The encrypted store against the plain one, side by side: a durable flush, and the load of many keys.
enum EncryptionCases {
    private static let key = try! WLStorageEncryptionKey.random()

    /// A set and a flush of a 100 B value, encrypted and plain, each in a directory of its own.
    static func flush(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("encrypted-flush") { directory in
            let plainDirectory = directory.appendingPathComponent("plain")
            let encryptedDirectory = directory.appendingPathComponent("encrypted")
            let values = ["a", "b"].map { String(repeating: $0, count: 98) }
            let plain = WLStorage(
                key: "value", defaultValue: values[1], flushInterval: nil, store: .directory(plainDirectory))
            let encrypted = WLStorage(
                key: "value", defaultValue: values[1], flushInterval: nil,
                store: WLStorageEncryptedStore(.directory(encryptedDirectory), key: key))
            plain.flush()
            encrypted.flush()
            var (plainCount, encryptedCount) = (0, 0)
            let results = harness.measure(
                [
                    Variant("encrypted") { n in
                        for _ in 0..<n {
                            encryptedCount += 1
                            encrypted.wrappedValue = values[encryptedCount & 1]
                            encrypted.flush()
                        }
                    },
                    Variant("plain") { n in
                        for _ in 0..<n {
                            plainCount += 1
                            plain.wrappedValue = values[plainCount & 1]
                            plain.flush()
                        }
                    },
                ], settings: harness.disk)
            return [
                Row(
                    caseID: "encrypted-flush", title: "flush of a 100 B value, encrypted",
                    subject: "encrypted set + flush()", value: results["encrypted"]!,
                    baseline: "plain set + flush()", baselineValue: results["plain"]!, target: .ratio(atMost: 1.05))
            ]
        }
    }

    /// Storages of 1,000 keys created at start, over encrypted files and over plain ones.
    static func load(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("encrypted-load") { directory in
            let keys = (0..<1_000).map { "key-\($0)" }
            let plainDirectory = directory.appendingPathComponent("plain")
            let encryptedDirectory = directory.appendingPathComponent("encrypted")
            let plainStore = WLStorageDirectoryStore.directory(plainDirectory)
            let encryptedStore = WLStorageEncryptedStore(.directory(encryptedDirectory), key: key)
            let encoder = JSONEncoder()
            for (index, key) in keys.enumerated() {
                let data = try! encoder.encode(
                    SampleSettings(name: "item \(index)", count: index, enabled: index % 2 == 0))
                try! plainStore.write(key: key, data: data)
                try! encryptedStore.write(key: key, data: data)
            }
            let fallback = SampleSettings(name: "", count: -1, enabled: false)
            func load(_ store: some WLStorageStore) -> UInt64 {
                var storages: [WLStorage<SampleSettings>] = []
                storages.reserveCapacity(keys.count)
                let start = monotonicNanoseconds()
                for key in keys {
                    storages.append(WLStorage(key: key, defaultValue: fallback, flushInterval: nil, store: store))
                }
                let elapsed = monotonicNanoseconds() - start
                precondition(storages[keys.count - 1].wrappedValue.count == keys.count - 1)
                return elapsed
            }
            // The plain files read through a store that only passes the bytes on: the path every store but a
            // directory takes, so that the cost of the encryption alone shows.
            let passing = PassingStore(base: plainStore)
            let results = harness.measure(
                [
                    Variant(name: "encrypted") { n in (0..<n).reduce(0) { total, _ in total + load(encryptedStore) } },
                    Variant(name: "plain") { n in (0..<n).reduce(0) { total, _ in total + load(plainStore) } },
                    Variant(name: "passing") { n in (0..<n).reduce(0) { total, _ in total + load(passing) } },
                ], settings: harness.disk)
            return [
                Row(
                    caseID: "encrypted-load", title: "load 1,000 keys at start, encrypted",
                    subject: "encrypted ×1,000", value: results["encrypted"]!, baseline: "plain ×1,000",
                    baselineValue: results["plain"]!, target: .ratio(atMost: 1.3)),
                Row(
                    caseID: "encrypted-load", title: "load 1,000 keys at start, encrypted",
                    subject: "encrypted ×1,000", value: results["encrypted"]!,
                    baseline: "plain ×1,000 through a store that passes bytes on", baselineValue: results["passing"]!),
            ]
        }
    }
}

/// A store that passes every call on to a directory store: a store of a program's own over plain files.
private struct PassingStore: WLStorageStore {
    let base: WLStorageDirectoryStore
    var identity: String { "passing:" + base.identity }
    func read(key: String) throws -> Data? { try base.read(key: key) }
    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }
    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        base.observeChanges(changed)
    }
}
