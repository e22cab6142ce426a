import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Storages in three programs on one server, end to end: `WLStorage(key:defaultValue:flushInterval:store:)` over the
/// PostgreSQL store, its change feed, and the observers of each program.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresReplicaTests {
    private func replicas(_ count: Int, url: String, namespace: String, flushInterval: Int = 1) throws -> [Replica] {
        try (0..<count).map { _ in try Replica(url: url, namespace: namespace, flushInterval: flushInterval) }
    }

    /// What each replica printed, for a failing test.
    private func describe(_ replicas: [Replica]) -> String {
        replicas.enumerated().map { "replica \($0):\n\($1.printed)\n\($1.printedErrors)" }.joined(separator: "\n")
    }

    /// What the server holds for the replicas' key, decoded.
    private func stored(_ url: String, _ namespace: String) throws -> Int? {
        let data = try WLStoragePostgresStore(url: url, namespace: namespace).read(key: "x")
        return try data.map { try JSONDecoder().decode(Int.self, from: $0) }
    }

    @Test func aSetInOneReplicaIsSeenByTheOthersThroughEveryObserver() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let replicas = try replicas(3, url: url, namespace: namespace)
        for (round, writer) in replicas.enumerated() {
            let value = round + 1
            try writer.set(value)
            for replica in replicas {
                #expect(replica.waitUntilObserversSee(value), "\(replica.printed)\n\(replica.printedErrors)")
            }
        }
        #expect(try stored(url, namespace) == 3)
    }

    @Test func atomicUpdatesFromThreeReplicasLoseNoIncrement() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let replicas = try replicas(3, url: url, namespace: namespace)
        // All three update the same row at once, each from the value the server holds.
        for replica in replicas { replica.send("increment 200") }
        for replica in replicas {
            #expect(replica.waitFor("incremented 200", timeout: 120), "\(describe(replicas))")
        }
        #expect(try stored(url, namespace) == 600)
        for replica in replicas {
            #expect(replica.waitUntilObserversSee(600), "\(replica.printed)\n\(replica.printedErrors)")
        }
    }

    @Test func atomicUpdatesFromThreeReplicasOfAnEncryptedStoreLoseNoIncrement() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let replicas = try (0..<3).map { _ in
            try Replica(url: url, namespace: namespace, encryptionKey: key.base64EncodedSecret)
        }
        for replica in replicas { replica.send("increment 100") }
        for replica in replicas {
            #expect(replica.waitFor("incremented 100", timeout: 120), "\(describe(replicas))")
        }
        // The row holds the sealed value, which opens to every increment.
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let sealed = try #require(try store.read(key: "x"))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("300"))
        let opened = try store.encrypted(with: key).read(key: "x")
        #expect(opened.map { String(decoding: $0, as: UTF8.self) } == "300")
        for replica in replicas {
            #expect(replica.waitUntilObserversSee(300), "\(replica.printed)\n\(replica.printedErrors)")
        }
    }

    @Test(arguments: [PostgresCluster.StopMode.fast, .immediate])
    func replicasConvergeOnTheLastValueAcrossAServerStop(mode: PostgresCluster.StopMode) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let replicas = try replicas(3, url: cluster.url, namespace: namespace)
        try replicas[0].set(1)
        for replica in replicas { #expect(replica.waitUntilObserversSee(1)) }

        // Set while the server is down: the values stay pending in the replica, and the last reaches the others once
        // the server is back.
        try cluster.stop(mode: mode)
        try replicas[1].set(2)
        try replicas[1].set(3)
        try cluster.start()
        for replica in replicas {
            #expect(replica.waitUntilObserversSee(3), "\(describe(replicas))\n\(cluster.log)")
        }
        #expect(try stored(cluster.url, namespace) == 3)

        // And they keep listening after the restart.
        try replicas[2].set(4)
        for replica in replicas { #expect(replica.waitUntilObserversSee(4), "\(describe(replicas))") }
        #expect(try stored(cluster.url, namespace) == 4)
    }

    @Test func aReplicaKilledWithSIGKILLLosesOnlyWhatItHadNotWritten() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let writer = try Replica(url: url, namespace: namespace, flushInterval: 3_600)
        let reader = try Replica(url: url, namespace: namespace)
        // The default was saved at start, so even the first change waits for the interval: flushed here.
        try writer.set(1)
        writer.send("flush")
        #expect(writer.waitFor("flushed"))
        #expect(reader.waitUntilObserversSee(1))
        try writer.set(2)
        writer.signal(SIGKILL)
        let end = try #require(writer.waitForExit())
        #expect(end.reason == .uncaughtSignal)
        #expect(try stored(url, namespace) == 1)
        #expect(reader.lines.allSatisfy { !$0.hasSuffix(" 2") })
    }

    @Test func aReplicaEndedWithSIGTERMFlushesToTheServer() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let writer = try Replica(url: url, namespace: namespace, flushInterval: 3_600)
        let reader = try Replica(url: url, namespace: namespace)
        // The default was saved at start, so even the first change waits for the interval: flushed here.
        try writer.set(1)
        writer.send("flush")
        #expect(writer.waitFor("flushed"))
        #expect(reader.waitUntilObserversSee(1))
        try writer.set(2)
        writer.signal(SIGTERM)
        let end = try #require(writer.waitForExit())
        #expect(end.reason == .uncaughtSignal)
        #expect(end.status == SIGTERM)
        #expect(try stored(url, namespace) == 2)
        #expect(reader.waitUntilObserversSee(2), "\(reader.printed)\n\(reader.printedErrors)")
    }
}
