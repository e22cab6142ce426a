import Dispatch
import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// A write's notification carries the row's new version and bytes: a replica adopts them without reading the row when
/// the version follows the one it knows, ignores an older one, and reads the row whenever it cannot trust what came (a
/// gap in versions, a value too large to carry, a reconnection). An encrypted store's notifications carry sealed bytes.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresCarriedChangeTests {
    /// A replica's storage of `key`, with every value its observer received, in order.
    final class Replica: Sendable {
        private final class Log: Sendable {
            let values = Lock<[Int]>([])
        }

        let storage: WLStorage<Int>
        private let log = Log()
        private let subscription: WLStorageSubscription

        init(key: String, store: any WLStorageStore) {
            storage = WLStorage(key: key, defaultValue: 0, flushInterval: 0, store: store)
            let log = self.log
            subscription = storage.onChange(queue: DispatchQueue(label: "carried-replica")) { value in
                log.values.withLock { $0.append(value) }
            }
        }

        var values: [Int] { log.values.withLock { $0 } }
        var value: Int { storage.wrappedValue }

        deinit {
            subscription.cancel()
        }
    }

    /// A store of `namespace` whose listener can be told from others' by its application name.
    private static func store(_ url: String, _ namespace: String, application: String? = nil) throws
        -> WLStoragePostgresStore
    {
        let url = application.map { url + "&application_name=\($0)" } ?? url
        return try WLStoragePostgresStore(
            url: url, namespace: namespace, timeout: .seconds(10), adoptsNotifiedValues: true)
    }

    /// Sends `payload` on the store's channel by hand.
    private static func notify(_ admin: PostgresConnection, _ payload: String) throws {
        try sqlValue(admin, "SELECT pg_notify('wlstorage_changes', $1)", [payload])
    }

    /// The OID of the default table, which carried changes name.
    private static let table: String = {
        let admin = try! adminConnection(try! PostgresCluster.shared().url)
        return try! sqlValue(admin, "SELECT 'public.wlstorage'::regclass::oid::text")!
    }()

    /// The payload the store sends for a write of `value` (an `Int`'s JSON) at `version`.
    private static func carried(_ namespace: String, _ key: String, version: Int64, value: Int?) -> String {
        let prefix = WLStoragePostgresStore.payload(namespace: namespace, key: key) + "\(version).\(table)"
        guard let value else { return prefix }
        return prefix + ":" + Data("\(value)".utf8).base64EncodedString()
    }

    /// Changes the row of `key` to `value` by hand, its version one more, without a notification.
    private static func silentlyWrite(_ admin: PostgresConnection, _ namespace: String, _ key: String, _ value: Int)
        throws
    {
        try sqlValue(
            admin,
            "UPDATE wlstorage SET value = convert_to($3, 'UTF8'), version = version + 1 WHERE namespace = $1 AND key = $2",
            [namespace, key, "\(value)"])
    }

    private static func version(_ admin: PostgresConnection, _ namespace: String, _ key: String) throws -> Int64? {
        try sqlValue(admin, "SELECT version::text FROM wlstorage WHERE namespace = $1 AND key = $2", [namespace, key])
            .flatMap { Int64($0) }
    }

    // MARK: - The payload

    @Test func aWritesNotificationCarriesItsVersionAndBytesOrOnlyItsVersionWhenTooLarge() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "warm", data: bytes("up"))
        let listener = try adminConnection(cluster.url)
        try sqlValue(listener, "LISTEN wlstorage_changes")
        try writer.write(key: "k", data: bytes("first"))
        try writer.write(key: "k", data: bytes("second"))
        let large = Data(repeating: UInt8(ascii: "x"), count: 6_000)
        try writer.write(key: "k", data: large)
        try writer.write([WLStorageStoreWrite(key: "k", data: bytes("batch")), .init(key: "b", data: bytes("b"))])
        try writer.remove(key: "b")
        var events: [WLStorageFeedEvent] = []
        #expect(
            try eventuallyThrowing {
                events += try listener.notifications().compactMap {
                    WLStoragePostgresStore.change(fromPayload: $0.payload, namespace: namespace, table: Self.table)
                }
                return events.count >= 6
            })
        try #require(events.count == 6, "\(events)")
        #expect(
            Array(events[0..<3]) == [
                .carried(WLStorageCarriedChange(key: "k", version: 1, data: bytes("first"))),
                .carried(WLStorageCarriedChange(key: "k", version: 2, data: bytes("second"))),
                .carried(WLStorageCarriedChange(key: "k", version: 3, data: nil)),
            ])
        // The rows of one statement, in any order.
        #expect(events[3..<5].contains(.carried(WLStorageCarriedChange(key: "k", version: 4, data: bytes("batch")))))
        #expect(events[3..<5].contains(.carried(WLStorageCarriedChange(key: "b", version: 1, data: bytes("b")))))
        #expect(events[5] == .change(.key("b")))
    }

    /// Stores of tables of the same name in two schemas (two search paths) share the channel: a change carried for
    /// one table is only a change to read for the other.
    @Test func aPayloadOfAnotherTableOrOfAnUnknownOneIsAChangeToRead() {
        let payload =
            WLStoragePostgresStore.payload(namespace: "n", key: "k") + "3.12345:" + Data("1".utf8).base64EncodedString()
        #expect(
            WLStoragePostgresStore.change(fromPayload: payload, namespace: "n", table: "12345")
                == .carried(WLStorageCarriedChange(key: "k", version: 3, data: Data("1".utf8))))
        #expect(WLStoragePostgresStore.change(fromPayload: payload, namespace: "n", table: "999") == .change(.key("k")))
        #expect(WLStoragePostgresStore.change(fromPayload: payload, namespace: "n", table: nil) == .change(.key("k")))
        #expect(WLStoragePostgresStore.change(fromPayload: payload, namespace: "m", table: "12345") == nil)
    }

    @Test func aPublicFeedReportsACarriedChangeAsAKey() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try Self.store(cluster.url, namespace)
        let other = try Self.store(cluster.url, namespace)
        try other.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)
        try other.write(key: "k", data: bytes("1"))
        #expect(feed.waitFor(.key("k")))
    }

    // MARK: - Adopting, ignoring, reading

    @Test func aReplicaTakesTheNextVersionFromTheNotificationWithoutReadingTheRow() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        // The writer writes through a store of its own, and no storage: the replica's storage is the key's only cell
        // in this process, and its store's feed hears the writer's notifications.
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = Replica(key: "k", store: try Self.store(cluster.url, namespace))
        #expect(replica.value == 1)
        let admin = try adminConnection(cluster.url)
        // Once the replica has read the row with its version (its feed's first report), a payload of the next version
        // is taken as it is: it holds 7 while the row still holds 1, which only a replica that did not read shows.
        let version = try #require(try Self.version(admin, namespace, "k"))
        #expect(
            try eventuallyThrowing {
                try Self.notify(admin, Self.carried(namespace, "k", version: version + 1, value: 7))
                return eventually(timeout: 1) { replica.value == 7 }
            })
    }

    @Test func aPayloadOlderThanWhatTheReplicaHoldsIsIgnored() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = Replica(key: "k", store: try Self.store(cluster.url, namespace))
        try writer.write(key: "k", data: bytes("2"))
        try #require(eventually { replica.value == 2 })
        let admin = try adminConnection(cluster.url)
        let version = try #require(try Self.version(admin, namespace, "k"))
        // Received out of order: the payload of the version before, and one of the same version with other bytes.
        try Self.notify(admin, Self.carried(namespace, "k", version: version - 1, value: 1))
        try Self.notify(admin, Self.carried(namespace, "k", version: version, value: 99))
        // A marker after them: the next write.
        try writer.write(key: "k", data: bytes("3"))
        #expect(eventually { replica.value == 3 })
        #expect(!replica.values.contains(1) && !replica.values.contains(99), "\(replica.values)")
    }

    /// A write's notification, then the row deleted by hand and made anew at version 1, heard together behind a change
    /// to read: the last notification is the row's newest write, and the replica ends holding it, not the write before
    /// the deletion, whose version follows on from the one it knew.
    @Test func aRowDeletedByHandAndMadeAnewAfterAWriteHeardTogetherEndsHeldAtItsNewestWrite() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = Replica(key: "k", store: try Self.store(cluster.url, namespace))
        #expect(replica.value == 1)
        let admin = try adminConnection(cluster.url)
        let version = try #require(try Self.version(admin, namespace, "k"))
        // One transaction: its notifications reach the listener together, at its commit.
        try sqlValue(admin, "BEGIN")
        // A change of another key to read first: the round of checks it starts gathers the changes heard after it.
        try Self.notify(admin, WLStoragePostgresStore.removalPayload(namespace: namespace, key: "other"))
        try Self.silentlyWrite(admin, namespace, "k", 2)
        try Self.notify(admin, Self.carried(namespace, "k", version: version + 1, value: 2))
        try sqlValue(admin, "DELETE FROM wlstorage WHERE namespace = $1 AND key = $2", [namespace, "k"])
        try sqlValue(
            admin,
            "INSERT INTO wlstorage (namespace, key, value, version) VALUES ($1, $2, convert_to('10', 'UTF8'), 1)",
            [namespace, "k"])
        try Self.notify(admin, Self.carried(namespace, "k", version: 1, value: 10))
        try sqlValue(admin, "COMMIT")
        #expect(eventually { replica.value == 10 }, "the replica holds \(replica.value): \(replica.values)")
    }

    /// The replica's own write makes the row anew at version 1 (deleted by hand before, which no notification says);
    /// the row is deleted by hand again and another program's write makes it at version 1 too. The replica hears its
    /// own write and the other's at the same version, with other bytes: it reads the row, and holds the other's value.
    @Test func anotherProgramsWriteAtTheVersionOfTheReplicasOwnWriteIsTaken() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = Replica(key: "k", store: try Self.store(cluster.url, namespace))
        #expect(replica.value == 1)
        let admin = try adminConnection(cluster.url)
        let delete = "DELETE FROM wlstorage WHERE namespace = $1 AND key = $2"
        try sqlValue(admin, delete, [namespace, "k"])
        replica.storage.wrappedValue = 10
        replica.storage.flush()
        #expect(try Self.version(admin, namespace, "k") == 1)
        try sqlValue(admin, delete, [namespace, "k"])
        try writer.write(key: "k", data: bytes("20"))
        #expect(try Self.version(admin, namespace, "k") == 1)
        #expect(eventually { replica.value == 20 }, "the replica holds \(replica.value): \(replica.values)")
    }

    @Test func aGapInVersionsMakesTheReplicaReadTheRow() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = Replica(key: "k", store: try Self.store(cluster.url, namespace))
        let admin = try adminConnection(cluster.url)
        // Wait until the replica has read the row with its version: a payload of the next one is then taken.
        let start = try #require(try Self.version(admin, namespace, "k"))
        #expect(
            try eventuallyThrowing {
                try Self.notify(admin, Self.carried(namespace, "k", version: start + 1, value: 2))
                return eventually(timeout: 1) { replica.value == 2 }
            })
        // The replica knows version start + 1 now. The row goes there and one further by hand, unannounced (a payload
        // missed), and a payload two versions ahead of what the replica knows arrives: it reads the row.
        try Self.silentlyWrite(admin, namespace, "k", 5)
        try Self.silentlyWrite(admin, namespace, "k", 6)
        try Self.notify(admin, Self.carried(namespace, "k", version: start + 3, value: 42))
        #expect(eventually { replica.value == 6 }, "\(replica.values)")
        #expect(!replica.values.contains(42))
        // A payload with the version only (a value too large to carry) is read too.
        try Self.silentlyWrite(admin, namespace, "k", 8)
        try Self.notify(admin, Self.carried(namespace, "k", version: start + 3, value: nil))
        #expect(eventually { replica.value == 8 }, "\(replica.values)")
    }

    @Test func aReplicaWhoseListenerReconnectsReadsTheRowAndThenIgnoresOlderPayloads() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let application = "carried-\(UUID().uuidString.prefix(8))"
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = Replica(key: "k", store: try Self.store(cluster.url, namespace, application: application))
        try writer.write(key: "k", data: bytes("2"))
        try #require(eventually { replica.value == 2 })
        let admin = try adminConnection(cluster.url)
        // Changed unannounced, and then the replica's listening connection is cut: it reads the row once it listens
        // again.
        try Self.silentlyWrite(admin, namespace, "k", 3)
        let terminated = try sqlValue(
            admin,
            "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity WHERE application_name = $1 "
                + "AND (query LIKE 'LISTEN%' OR query = 'SELECT 1' OR query LIKE 'SELECT to_regclass%')", [application])
        #expect(terminated == "1")
        #expect(eventually(timeout: 30) { replica.value == 3 }, "\(replica.values)")
        // It knows the row's version now: the payload of an earlier one changes nothing.
        let version = try #require(try Self.version(admin, namespace, "k"))
        try Self.notify(admin, Self.carried(namespace, "k", version: version - 1, value: 2))
        try writer.write(key: "k", data: bytes("4"))
        #expect(eventually { replica.value == 4 })
        #expect(replica.values.last(where: { $0 != 4 }) == 3, "\(replica.values)")
    }

    @Test func aReplicasOwnWriteIsNotUndoneByTheCarriedChangeItFollows() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = Replica(key: "k", store: try Self.store(cluster.url, namespace))
        try writer.write(key: "k", data: bytes("2"))
        try #require(eventually { replica.value == 2 })
        let admin = try adminConnection(cluster.url)
        let version = try #require(try Self.version(admin, namespace, "k"))
        // Another replica's write, whose notification is late: the replica writes after it, and then hears of it.
        try Self.silentlyWrite(admin, namespace, "k", 3)
        replica.storage.wrappedValue = 10
        replica.storage.flush()
        try Self.notify(admin, Self.carried(namespace, "k", version: version + 1, value: 3))
        // A marker after it: the next write.
        try writer.write(key: "k", data: bytes("11"))
        #expect(eventually { replica.value == 11 })
        #expect(!replica.values.contains(3), "\(replica.values)")
    }

    // MARK: - Encrypted stores

    @Test func anEncryptedStoresNotificationsCarrySealedBytesThatTheReplicaOpens() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let secret = "a secret that never travels in the clear"
        let writer = WLStorage(
            key: "s", defaultValue: "", flushInterval: 0,
            store: try Self.store(cluster.url, namespace).encrypted(with: key))
        writer.wrappedValue = "first"
        writer.flush()
        let replicaStore = try Self.store(cluster.url, namespace)
        let replica = WLStorage(
            key: "s", defaultValue: "", flushInterval: 0, store: replicaStore.encrypted(with: key))
        #expect(replica.wrappedValue == "first")
        let listener = try adminConnection(cluster.url)
        try sqlValue(listener, "LISTEN wlstorage_changes")
        writer.wrappedValue = secret
        writer.flush()
        #expect(eventually { replica.wrappedValue == secret })
        // Other tests share the channel: only this namespace's carried change of the key counts.
        var payloads: [String] = []
        func carried(_ payload: String) -> WLStorageCarriedChange? {
            let change = WLStoragePostgresStore.change(fromPayload: payload, namespace: namespace, table: Self.table)
            guard case .carried(let carried) = change, carried.key == "s" else { return nil }
            return carried
        }
        #expect(
            try eventuallyThrowing {
                payloads += try listener.notifications().map(\.payload).filter { carried($0) != nil }
                return !payloads.isEmpty
            })
        let payload = try #require(payloads.first)
        guard let carried = carried(payload), let sealed = carried.data else {
            Issue.record("not a carried change with bytes: \(payload)")
            return
        }
        // Sealed bytes, not the value's JSON, in any form the payload could hold it.
        let json = try JSONEncoder().encode(secret)
        #expect(!payload.contains(secret))
        #expect(!payload.contains(json.base64EncodedString().dropLast(4)))
        #expect(sealed.range(of: Data(secret.utf8)) == nil)
        #expect(sealed != json)
        #expect(
            try Stores.capabilities(of: replicaStore.encrypted(with: key)).carried?.opened(sealed, key: "s") == json)
    }
}
