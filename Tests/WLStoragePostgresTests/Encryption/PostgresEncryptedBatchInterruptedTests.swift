import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

/// The batch on condition of an encrypted store's objects in a flush of every storage, cut between the read of its keys
/// and its write (the server restarted as after a crash, or still down), or whose read meets a row too large to read or
/// a key PostgreSQL cannot hold: what it reports written holds this program's change and another program's field; the
/// rest stays pending, reported, and is written later.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresEncryptedBatchInterruptedTests {
    struct Entry: Codable, Sendable, Equatable {
        var text = ""
        var note = ""
    }

    /// The PostgreSQL store, whose read of many keys runs `afterRead` once, after it read them.
    final class InterruptedStore: WLStorageVersionedStore {
        let base: WLStoragePostgresStore
        let afterRead: Lock<(@Sendable () -> Void)?>
        /// The keys of each batch on condition.
        let batches = Lock<[[String]]>([])
        var identity: String { base.identity }

        init(_ base: WLStoragePostgresStore, afterRead: @escaping @Sendable () -> Void) {
            self.base = base
            self.afterRead = Lock(afterRead)
        }

        func read(key: String) throws -> Data? { try base.read(key: key) }
        func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
        func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
        func write(_ batch: [WLStorageStoreWrite]) throws { try base.write(batch) }
        func remove(key: String) throws { try base.remove(key: key) }
        func remove(key: String, ifItHolds data: Data) throws -> Bool { try base.remove(key: key, ifItHolds: data) }
        func keys() throws -> [String] { try base.keys() }
        func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
            base.observeChanges(changed)
        }
        func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
            try base.write(key: key, data: data, ifItHolds: expected)
        }
        func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
            batches.withLock { $0.append(batch.map(\.key)) }
            return try base.write(batch, ifTheyHold: expected)
        }
        var settlesLostAnswers: Bool { base.settlesLostAnswers }
        func readVersioned(key: String) throws -> WLStorageVersionedRead { try base.readVersioned(key: key) }
        func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
            -> WLStorageTaggedWriteResult
        {
            try base.write(key: key, data: data, ifVersion: version, tag: tag)
        }
        func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
            try base.trace(of: tag, key: key)
        }
        func read(keys: [String]) throws -> [Data?] {
            let values = try base.read(keys: keys)
            afterRead.withLock { body in
                defer { body = nil }; return body
            }?()
            return values
        }
    }

    /// Objects read, every fifth of which another program changed in its other field, unheard of; a flush of every
    /// storage whose batch read the keys, then met the server restarted (`restart`), or down past the store's timeout
    /// (`down`: started again once the flush is over, the changes pending and reported until a later flush).
    @Test(arguments: ["restart", "down"])
    func aBatchCutBetweenItsReadAndItsWriteLosesNothing(cut: String) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let key = try WLStorageEncryptionKey.random()
        let postgres = try WLStoragePostgresStore(
            url: cluster.url, namespace: "cut", timeout: .seconds(cut == "down" ? 2 : 20))
        let store = InterruptedStore(postgres) {
            try? cluster.stop(mode: .immediate)
            if cut == "restart" { try? cluster.start() }
        }
        let encrypted = store.encrypted(with: key)
        let outside = try WLStoragePostgresStore(url: cluster.url, namespace: "cut", timeout: .seconds(60))
        let other = outside.encrypted(with: key)
        let names = (0..<30).map { String(format: "k%02d", $0) }
        try other.write(names.map { WLStorageStoreWrite(key: $0, data: Data(#"{"note":"","text":""}"#.utf8)) })
        let storages = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: encrypted) }
        #expect(storages.allSatisfy { $0.wrappedValue == Entry() })
        #expect(eventually(timeout: 60) { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.text = "t\(index)" }
        // Another program's change of the other field, without a notification.
        let changed = names.indices.filter { $0 % 5 == 0 }
        // Sealed for the same key names in another namespace, then copied into the rows with plain SQL.
        let scratch = try WLStoragePostgresStore(url: cluster.url, namespace: "scratch").encrypted(with: key)
        try scratch.write(
            changed.map { WLStorageStoreWrite(key: names[$0], data: Data(#"{"note":"n\#($0)","text":""}"#.utf8)) })
        let admin = try adminConnection(cluster.url)
        _ = try sqlValue(
            admin,
            """
            UPDATE wlstorage AS row SET value = copy.value, version = row.version + 1 FROM wlstorage AS copy \
            WHERE row.namespace = 'cut' AND copy.namespace = 'scratch' AND copy.key = row.key
            """)
        admin.close()

        flushAllStores([encrypted])
        if cut == "down" {
            #expect(
                storages.allSatisfy { $0.hasPendingChanges }, "a change was reported written while the server was down")
            #expect(storages.allSatisfy { $0.lastError != nil }, "a change left pending was not reported")
            try cluster.start()
        }
        #expect(store.afterRead.withLock { $0 } == nil, "the batch read no keys")
        func check(_ index: Int) throws {
            let stored = try JSONDecoder().decode(Entry.self, from: try #require(try other.read(key: names[index])))
            #expect(
                stored == Entry(text: "t\(index)", note: changed.contains(index) ? "n\(index)" : ""),
                "\(names[index]): \(stored.text.prefix(8)) \(stored.note)")
        }
        for index in names.indices where !storages[index].hasPendingChanges { try check(index) }
        #expect(
            eventually(timeout: 120) {
                if storages.contains(where: \.hasPendingChanges) { flushAllStores([encrypted]) }
                return storages.allSatisfy { !$0.hasPendingChanges }
            }, "\(storages.compactMap(\.lastError).prefix(2))")
        for index in names.indices { try check(index) }
    }

    /// Objects to flush, among them one whose row another program made larger than the largest value read, or one whose
    /// key holds a NUL character: the row too large fails the batch's read of the keys, which reads the others again
    /// without it, and the key with a NUL is never in the batch on condition; every other object is written in one
    /// batch, and the one that cannot be read or held stays pending, reported, and its row as it was.
    @Test(arguments: ["too large", "NUL"])
    func aKeyTheBatchCannotReadLeavesOnlyItsOwnObjectPending(odd: String) throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let postgres = InterruptedStore(try WLStoragePostgresStore(url: cluster.url, namespace: namespace)) {}
        let store = postgres.encrypted(with: try .random())
        let names = (0..<20).map { String(format: "k%02d", $0) }
        let oddName = odd == "NUL" ? "k05\u{0}" : "k05"
        for name in names { try store.write(key: name, data: Data(#"{"note":"","text":""}"#.utf8)) }
        let storages = (names + (odd == "NUL" ? [oddName] : [])).map {
            WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: store)
        }
        #expect(eventually(timeout: 60) { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        let size = WLStorageSystem.maximumValueSize + 64 * 1024
        if odd == "too large" {
            _ = try sqlValue(
                admin,
                "UPDATE wlstorage SET value = convert_to(repeat('x', \(size)), 'UTF8')"
                    + " WHERE namespace = $1 AND key = $2",
                [namespace, oddName])
        }
        for (index, storage) in storages.enumerated() { storage.wrappedValue.text = "t\(index)" }

        flushAllStores([store])
        let oddIndex = try #require(storages.firstIndex { $0.key == oddName })
        for (index, storage) in storages.enumerated() where index != oddIndex {
            #expect(!storage.hasPendingChanges, "\(storage.key): \(storage.lastError?.message ?? "")")
            let stored = try JSONDecoder().decode(Entry.self, from: try #require(try store.read(key: storage.key)))
            #expect(stored == Entry(text: "t\(index)"), "\(storage.key): \(stored)")
        }
        // One batch, without the odd key. A storage whose cell was busy at the flush (checking a notification of the
        // writes above, which may come late on a loaded machine) writes on its own, so the batch may lack it.
        let batches = postgres.batches.withLock { $0 }
        #expect(batches.count == 1 && batches.allSatisfy { !$0.contains(oddName) }, "batches: \(batches)")
        #expect(storages[oddIndex].hasPendingChanges, "the change of the key that cannot be read was reported written")
        #expect(storages[oddIndex].lastError != nil)
        if odd == "too large" {
            let length = try sqlValue(
                admin, "SELECT octet_length(value)::text FROM wlstorage WHERE namespace = $1 AND key = $2",
                [namespace, oddName])
            #expect(length == String(size), "the row too large to read was replaced")
        }
    }
}
