import Foundation
import Synchronization
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Two programs set their own field of one encrypted object while the server restarts cleanly (`pg_ctl restart -m
/// fast`: sessions ended with "terminating connection due to administrator command", then refused): each program's
/// last value of its field is in the row once they are flushed, as in a plain store. Its server is its own.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresEncryptedFieldsAcrossRestartTests {
    struct Pair: Codable, Equatable {
        var a = 0
        var b = 0
    }

    @Test func eachProgramsFieldOfAnEncryptedObjectSurvivesAFastRestart() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        // Two programs: two store handles of the same table and row whose identities differ (one names the search
        // path), so that each has a cell and connections of its own. (Storages of one identity share one cell, where
        // two threads' `wrappedValue.a = …` and `wrappedValue.b = …` replace each other's field, as two sets do.)
        let stores = try [cluster.url, cluster.connectionURL(options: "-c search_path=public")].map {
            try WLStoragePostgresStore(url: $0, namespace: namespace, timeout: .seconds(5)).encrypted(with: key)
        }
        try #require(stores[0].identity != stores[1].identity)
        let a = WLStorage(key: "pair", defaultValue: Pair(), flushInterval: 0, store: stores[0])
        let b = WLStorage(key: "pair", defaultValue: Pair(), flushInterval: 0, store: stores[1])
        // Each program sets its field to 1, 2, 3… and flushes each tenth, until told to stop; its last value is kept.
        let last = Lock([0, 0])
        let stop = Atomic<Bool>(false)
        let stopped = Atomic<Int>(0)
        for (index, storage) in [a, b].enumerated() {
            Thread.detachNewThread {
                var round = 0
                while !stop.load(ordering: .acquiring) {
                    round += 1
                    if index == 0 { storage.wrappedValue.a = round } else { storage.wrappedValue.b = round }
                    if round % 10 == 0 { storage.flush() }
                    last.withLock { $0[index] = round }
                }
                stopped.add(1, ordering: .releasing)
            }
        }
        func progress() -> Bool {
            let now = last.withLock { $0 }
            return (0..<2).allSatisfy { index in
                eventually(timeout: 120) { last.withLock { $0[index] } >= now[index] + 30 }
            }
        }
        try #require(progress())
        try cluster.restart(mode: .fast)
        #expect(progress())
        stop.store(true, ordering: .releasing)
        // A set or a flush that has not returned within two minutes, the server up, is a fault of its own.
        try #require(
            eventually(timeout: 120) { stopped.load(ordering: .acquiring) == 2 },
            "a program's set or flush has not returned; last sets \(last.withLock { $0 })")
        // Each program's field holds its last set: taking the other's writes never brings back an older one.
        let expected = last.withLock { Pair(a: $0[0], b: $0[1]) }
        #expect(
            [a.wrappedValue.a, b.wrappedValue.b] == [expected.a, expected.b],
            Comment(
                rawValue: "a holds \(a.wrappedValue) (\(String(describing: a.lastError))), b \(b.wrappedValue)"
                    + " (\(String(describing: b.lastError)))"))
        let stored = {
            a.flush()
            b.flush()
            return (try? stores[0].read(key: "pair")).flatMap { try? JSONDecoder().decode(Pair.self, from: $0) }
        }
        #expect(eventually(timeout: 120) { stored() == expected }, "\(String(describing: stored())) \(expected)")
    }
}
