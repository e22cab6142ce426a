import Dispatch
import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// What a replica's observers receive from carried changes that come fast, several in one read of the listening
/// connection: values in the order they were written, never one older than what came before, and the last one always.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresCarriedChangeOrderTests {
    /// A storage of `key` with two observers on queues of their own, each with the values it received, in order.
    final class ObservedReplica: Sendable {
        private final class Log: Sendable {
            let values = Lock<[Int]>([])
        }

        let storage: WLStorage<Int>
        private let logs = [Log(), Log()]
        private let subscriptions: [WLStorageSubscription]

        init(key: String, store: any WLStorageStore) {
            storage = WLStorage(key: key, defaultValue: 0, flushInterval: 0, store: store)
            let storage = self.storage
            subscriptions = logs.enumerated().map { index, log in
                storage.onChange(queue: DispatchQueue(label: "observer-\(index)")) { value in
                    log.values.withLock { $0.append(value) }
                }
            }
        }

        /// Each observer's values.
        var received: [[Int]] { logs.map { $0.values.withLock { $0 } } }

        deinit {
            for subscription in subscriptions { subscription.cancel() }
        }
    }

    private static func store(_ url: String, _ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10), adoptsNotifiedValues: true)
    }

    /// Whether every value in `values` is larger than the one before.
    private static func increases(_ values: [Int]) -> Bool {
        zip(values, values.dropFirst()).allSatisfy { $0 < $1 }
    }

    @Test func aBurstOfWritesReachesEveryObserverInOrderEndingWithTheLast() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = ObservedReplica(key: "k", store: try Self.store(cluster.url, namespace))
        try writer.write(key: "k", data: bytes("2"))
        try #require(eventually { replica.received.allSatisfy { $0.last == 2 } }, "\(replica.received)")
        // Written back to back: the notifications come several at a time, in one read of the listening connection.
        for value in 3...300 { try writer.write(key: "k", data: bytes("\(value)")) }
        #expect(eventually { replica.received.allSatisfy { $0.last == 300 } }, "\(replica.received)")
        #expect(replica.storage.wrappedValue == 300)
        for values in replica.received {
            #expect(Self.increases(values), "\(values)")
        }
    }

    @Test func changesCommittedTogetherAreTakenToTheLastAndAnOlderPayloadAmongThemIsIgnored() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = try Self.store(cluster.url, namespace)
        try writer.write(key: "k", data: bytes("1"))
        let replica = ObservedReplica(key: "k", store: try Self.store(cluster.url, namespace))
        try writer.write(key: "k", data: bytes("2"))
        try #require(eventually { replica.received.allSatisfy { $0.last == 2 } }, "\(replica.received)")
        // Three writes in one transaction, each notified as the store notifies a write, and between the second and the
        // third the payload of the version before the first: PostgreSQL delivers all four at the commit, together.
        let admin = try adminConnection(cluster.url)
        let prefix = WLStoragePostgresStore.payload(namespace: namespace, key: "k")
        let table = "'public.wlstorage'::regclass::oid::text"
        func write(_ value: Int) throws {
            try sqlValue(
                admin,
                """
                WITH written AS (UPDATE wlstorage SET value = convert_to($3, 'UTF8'), version = version + 1 \
                WHERE namespace = $1 AND key = $2 RETURNING version) SELECT pg_notify('wlstorage_changes', \
                $4 || written.version::text || '.' || \(table) || ':' || encode(convert_to($3, 'UTF8'), 'base64')) \
                FROM written
                """, [namespace, "k", "\(value)", prefix])
        }
        let version = try #require(
            try sqlValue(
                admin, "SELECT version::text FROM wlstorage WHERE namespace = $1 AND key = $2", [namespace, "k"]
            )
            .flatMap { Int64($0) })
        try sqlValue(admin, "BEGIN")
        try write(11)
        try write(12)
        let old = "\(prefix)\(version).\(try #require(try sqlValue(admin, "SELECT \(table)"))):"
        try sqlValue(admin, "SELECT pg_notify('wlstorage_changes', $1)", [old + Data("2".utf8).base64EncodedString()])
        try write(13)
        try sqlValue(admin, "COMMIT")
        #expect(eventually { replica.received.allSatisfy { $0.last == 13 } }, "\(replica.received)")
        // A marker after them: a later write, so that a value taken late would show before it.
        try writer.write(key: "k", data: bytes("14"))
        #expect(eventually { replica.received.allSatisfy { $0.last == 14 } }, "\(replica.received)")
        for values in replica.received {
            #expect(Self.increases(values), "\(values)")
            #expect(values.filter { $0 == 2 }.count == 1, "\(values)")
        }
    }
}
