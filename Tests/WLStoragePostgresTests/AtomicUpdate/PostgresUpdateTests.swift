import Dispatch
import Foundation
import Synchronization
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Updates against a real server, through plain and encrypted stores: each counts exactly once, also when connections are
/// cut, and each ends.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresUpdateTests {
    private func store(_ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(
            url: try PostgresCluster.shared().url, namespace: namespace, table: "wlstorage", timeout: .seconds(10))
    }

    /// A key that holds empty bytes ("nothing stored") in the table, under an encrypted store: update() must end, as
    /// it does over the plain store.
    @Test func anUpdateOfAnEncryptedKeyHoldingEmptyBytesEnds() throws {
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let plain = try store(namespace)
        let encrypted = try store(namespace).encrypted(with: key)
        try encrypted.write(key: "n", data: bytes("5"))
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: encrypted)
        #expect(storage.wrappedValue == 5)
        // Another program empties the key.
        try plain.write(key: "n", data: Data())
        let done = Atomic<Bool>(false)
        Thread.detachNewThread {
            storage.update { $0 += 1 }
            done.store(true, ordering: .releasing)
        }
        // An update that retries its conditional write forever never ends; one that ends takes a few statements,
        // however loaded the machine and the server: 60 s is room for those, not a measure of them.
        let ended = eventually(timeout: 60) { done.load(ordering: .acquiring) }
        #expect(ended, "update() still running after 60 s: it retries its conditional write forever")
        if !ended {
            // Unblock it: an encrypted empty value opens to the empty bytes the update expects.
            try encrypted.write(key: "n", data: Data())
            #expect(eventually(timeout: 60) { done.load(ordering: .acquiring) })
        }
        #expect(storage.wrappedValue == 1)
        #expect(try encrypted.read(key: "n") == bytes("1"))
    }

    /// Every 0.1 s rather than 0.3: at 0.3 s, 300 increments each ended with a wrong total in one run of three before
    /// updates were tagged; at 0.1 s, in five of five (727 to 880 of 900).
    @Test(arguments: [false, true])
    func incrementsFromThreeReplicasAddUpWhileTheirConnectionsAreCut(encrypted: Bool) throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        // The replicas' connections carry a name of their own, so that only they are cut.
        let application = "wls_cut_\(UInt32.random(in: 0...UInt32.max))"
        let url = cluster.url + "&application_name=\(application)"
        let key = encrypted ? try WLStorageEncryptionKey.random() : nil
        let replicas = try (0..<3).map { _ in
            try Replica(url: url, namespace: namespace, encryptionKey: key?.base64EncodedSecret)
        }
        let cutter = ConnectionCutter(url: cluster.url, application: application)
        for replica in replicas { replica.send("increment 300") }
        var done = true
        for replica in replicas where !replica.waitFor("incremented 300", timeout: 240) { done = false }
        let cuts = cutter.stop()
        let described = replicas.enumerated().map { "replica \($0):\n\($1.printedErrors)" }.joined(separator: "\n")
        #expect(done, "\(described)")
        #expect(cuts > 0, "no connection was cut")
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let data = try key.map { try store.encrypted(with: $0).read(key: "x") } ?? store.read(key: "x")
        let total = try data.map { try JSONDecoder().decode(Int.self, from: $0) }
        #expect(total == 900, "\(cuts) connections cut; what the replicas reported:\n\(described)")
    }

    /// The tag of an update's write tells whether it was made however many writes came since, and a tag claimed before
    /// its write arrives makes that write fail.
    @Test func aTaggedWriteIsToldMadeOrNotHoweverManyWritesCameSince() throws {
        let cluster = try PostgresCluster.shared()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace())
        let made = WLStorageWriteTag.random()
        guard case .stored = try store.write(key: "k", data: bytes("0"), ifVersion: nil, tag: made) else {
            Issue.record("the first write was not stored")
            return
        }
        for count in 1...300 {
            guard case .found(_, let version) = try store.readVersioned(key: "k") else { return }
            _ = try store.write(key: "k", data: bytes("\(count)"), ifVersion: version, tag: .random())
        }
        let trace = try #require(try store.trace(of: made, key: "k"))
        #expect(trace.version == 301 && trace.committed(ifVersion: nil) == true)
        let claimed = WLStorageWriteTag.random()
        #expect(try store.trace(of: claimed, key: "k")?.committed(ifVersion: 301) == false)
        let late = try store.write(key: "k", data: bytes("late"), ifVersion: 301, tag: claimed)
        guard case .notStored = late else {
            Issue.record("a write whose tag was claimed: \(late)")
            return
        }
        #expect(try store.read(key: "k") == bytes("300"))
    }

    /// A store that only updates removes the tags older than an hour at its first write, as one that changes does.
    @Test func aStoreThatOnlyUpdatesRemovesOldTags() throws {
        let cluster = try PostgresCluster.shared()
        let table = "wls_updates_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try adminConnection(cluster.url)
        defer { _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes") }
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: table)
        #expect(try store.read(key: "k") == nil)
        try sqlValue(
            admin, "INSERT INTO \(table)_writes (tag, written_at) VALUES ('old', now() - interval '61 minutes')")
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        storage.update { $0 += 1 }
        #expect(try store.read(key: "k") == bytes("1"))
        #expect(try sqlValue(admin, "SELECT string_agg(tag, ',') FROM \(table)_writes WHERE tag = 'old'") == nil)
    }

    @Test func anUpdateThroughAnEncryptedStoreTagsItsWrite() throws {
        let cluster = try PostgresCluster.shared()
        let table = "wls_encrypted_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try adminConnection(cluster.url)
        defer { _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes") }
        ReportedErrors.install()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: table)
        let storage = WLStorage(
            key: "k", defaultValue: 0, flushInterval: nil, store: store.encrypted(with: try .random()))
        storage.update { $0 += 1 }
        storage.update { $0 += 1 }
        #expect(storage.lastError == nil, "\(String(describing: storage.lastError))")
        #expect(try sqlValue(admin, "SELECT count(*)::text FROM \(table)_writes WHERE NOT claimed") == "2")
    }
}

/// Ends the server processes of every connection named `application` (`pg_terminate_backend`) every 0.3 s, from a
/// connection of its own, until stopped; the server stays up.
final class ConnectionCutter: Sendable {
    private let stopped = Lock(false)
    private let ended = DispatchSemaphore(value: 0)
    private let count = Lock(0)

    init(url: String, application: String) {
        let thread = Thread { [self] in
            defer { ended.signal() }
            guard let admin = try? adminConnection(url) else { return }
            while !stopped.withLock({ $0 }) {
                usleep(100_000)
                let cut = try? sqlValue(
                    admin,
                    """
                    SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity \
                    WHERE application_name = $1 AND pid <> pg_backend_pid()
                    """, [application])
                count.withLock { $0 += cut.flatMap { Int($0) } ?? 0 }
            }
            admin.close()
        }
        thread.start()
    }

    /// Stops cutting; returns how many connections were cut.
    func stop() -> Int {
        stopped.withLock { $0 = true }
        ended.wait()
        return count.withLock { $0 }
    }
}
