import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

/// The batch on condition of an encrypted store's objects in a flush of every storage, through a proxy in front of
/// PostgreSQL, while between its read of the keys and its write another program with the right key (still sealing
/// with the key being rotated away) changes a field of some objects and one with another key replaces others: over a
/// slow link, with the connections cut, frozen past the store's timeout, or cut once the write committed (its answer
/// lost). What it reports written holds this program's change and the other's field; what it leaves pending is
/// reported; no value of the other key is replaced, and every other row opens.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresEncryptedBatchOverATroubledLinkTests {
    struct Entry: Codable, Sendable, Equatable {
        var text = ""
        var note = ""
    }

    enum Trouble: String, CaseIterable, Sendable {
        case slowLink, cutAfterTheRead, frozenPastTheTimeout, answerLost
    }

    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"), arguments: Trouble.allCases)
    func aBatchMeetingAnotherProgramsChangesAndATroubledLinkReplacesNothingNewerAndReportsWhatItLeaves(
        trouble: Trouble
    ) throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let (old, key, wrongKey) = (
            try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random(),
            try WLStorageEncryptionKey.random()
        )
        let url = "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres"
        let postgres = try WLStoragePostgresStore(
            url: url, namespace: namespace, timeout: .seconds(trouble == .frozenPastTheTimeout ? 2 : 10))
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace).encrypted(with: old)
        let wrong = try WLStoragePostgresStore(url: cluster.url, namespace: namespace).encrypted(with: wrongKey)
        let reader = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
            .encrypted(with: key, previousKeys: [old])
        let names = (0..<30).map { String(format: "k%02d", $0) }
        let changed = names.indices.filter { $0 % 5 == 0 }
        let foreign = names.indices.filter { $0 % 7 == 3 }
        let foreignValue = Data(#"{"note":"w","text":"w"}"#.utf8)
        try other.write(names.map { WLStorageStoreWrite(key: $0, data: Data(#"{"note":"","text":""}"#.utf8)) })
        /// What the namespace's rows hold, in one line.
        @Sendable func rows() throws -> String {
            let admin = try adminConnection(cluster.url)
            defer { admin.close() }
            return try sqlValue(
                admin,
                "SELECT coalesce(string_agg(md5(value), ',' ORDER BY key), '') FROM wlstorage WHERE namespace = $1",
                [namespace]) ?? ""
        }
        let cutter = Lock<DispatchGroup?>(nil)
        let committed = Lock(false)
        let store = PostgresEncryptedBatchInterruptedTests.InterruptedStore(postgres) {
            try? other.write(
                changed.map { WLStorageStoreWrite(key: names[$0], data: Data(#"{"note":"n\#($0)","text":""}"#.utf8)) })
            try? wrong.write(foreign.map { WLStorageStoreWrite(key: names[$0], data: foreignValue) })
            switch trouble {
            case .slowLink: break
            case .cutAfterTheRead: try? proxy.cut()
            case .frozenPastTheTimeout: try? proxy.freeze()
            case .answerLost:
                // The write reaches the server 1.5 s from now, its answer 1.5 s later: cut once it committed.
                let before = try? rows()
                try? proxy.delay(milliseconds: 1500)
                cutter.withLock {
                    $0 = startThread {
                        let seen = eventually(timeout: 60) { (try? rows()) != before }
                        committed.withLock { $0 = seen }
                        try? proxy.cut()
                        try? proxy.delay(milliseconds: 0)
                    }
                }
            }
        }
        let encrypted = store.encrypted(with: key, previousKeys: [old])
        let storages = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: encrypted) }
        #expect(storages.allSatisfy { $0.wrappedValue == Entry() })
        #expect(eventually(timeout: 60) { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.text = "t\(index)" }
        if trouble == .slowLink { try proxy.delay(milliseconds: 10) }

        flushAllStores([encrypted])
        cutter.withLock { $0 }?.wait()
        #expect(trouble != .answerLost || committed.withLock { $0 }, "the write was not carried out before the cut")
        #expect(store.afterRead.withLock { $0 } == nil, "the batch read no keys")
        func expected(_ index: Int) -> Entry {
            Entry(text: "t\(index)", note: changed.contains(index) ? "n\(index)" : "")
        }
        func check(_ index: Int) throws {
            if foreign.contains(index) {
                #expect(
                    try wrong.read(key: names[index]) == foreignValue,
                    "\(names[index]): the other key's value was replaced")
                #expect(
                    storages[index].hasPendingChanges, "\(names[index]): reported written over the other key's value")
                #expect(storages[index].lastError != nil, "\(names[index]): a change left pending was not reported")
                return
            }
            let stored = try JSONDecoder().decode(Entry.self, from: try #require(try reader.read(key: names[index])))
            if storages[index].hasPendingChanges {
                #expect(storages[index].lastError != nil, "\(names[index]): a change left pending was not reported")
                #expect(
                    stored == expected(index) || stored == Entry(note: expected(index).note),
                    "\(names[index]): \(stored)")
            } else {
                #expect(stored == expected(index), "\(names[index]): \(stored.text) \(stored.note)")
            }
        }
        for index in names.indices { try check(index) }
        if trouble == .slowLink {
            for index in names.indices where !foreign.contains(index) {
                #expect(
                    !storages[index].hasPendingChanges, "\(names[index]): \(storages[index].lastError?.message ?? "")")
            }
        }
        try proxy.delay(milliseconds: 0)
        let own = names.indices.filter { !foreign.contains($0) }.map { storages[$0] }
        #expect(
            eventually(timeout: 120) {
                if own.contains(where: \.hasPendingChanges) { flushAllStores([encrypted]) }
                return own.allSatisfy { !$0.hasPendingChanges }
            }, "\(own.compactMap(\.lastError).prefix(2))")
        for index in names.indices { try check(index) }
        // Once the other key's values are removed, the changes left pending on them are written.
        for index in foreign { try wrong.remove(key: names[index]) }
        #expect(
            eventually(timeout: 120) {
                if storages.contains(where: \.hasPendingChanges) { flushAllStores([encrypted]) }
                return storages.allSatisfy { !$0.hasPendingChanges }
            }, "\(storages.compactMap(\.lastError).prefix(2))")
        for index in foreign {
            let stored = try JSONDecoder().decode(Entry.self, from: try #require(try reader.read(key: names[index])))
            #expect(stored == Entry(text: "t\(index)"), "\(names[index]): \(stored)")
        }
    }

    /// A program ends with 200 values pending in an encrypted store over a link of 200 ms each way, written by the
    /// flush at exit (or on SIGTERM) in one batch on condition, and signals arrive while that batch runs: SIGTERM during
    /// the flush at exit, or SIGINT and SIGHUP during the one on SIGTERM. The program ends, and every value is stored,
    /// sealed with its key.
    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"), arguments: ["exit", "SIGTERM"])
    func signalsDuringTheFlushAtTheEndLoseNoEncryptedValue(end: String) throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let url = "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres"
        let child = try Replica(
            arguments: ["--pending", url, namespace, "1", "200", "20", "60"], encryptionKey: key.base64EncodedSecret)
        try proxy.delay(milliseconds: 200)
        child.send(end == "exit" ? "go" : "hold")
        #expect(child.waitFor("set"))
        let signals = end == "exit" ? [SIGTERM, SIGTERM] : [SIGTERM, SIGINT, SIGHUP]
        for signal in signals { child.signal(signal) }
        let ended = child.waitForExit(timeout: 120)
        #expect(ended != nil, "the program was still running after 120 s")
        // Ended by the signal whose flush ran first (libdispatch hands signals that came together in any order), or,
        // once exiting, by the exit's status too.
        let ends = signals.map { (Process.TerminationReason.uncaughtSignal, $0) } + (end == "exit" ? [(.exit, 0)] : [])
        #expect(
            ended.map { ended in ends.contains { $0 == ended.reason && $1 == ended.status } } == true,
            "\(String(describing: ended)) \(child.printedErrors)")
        try proxy.delay(milliseconds: 0)
        let reader = try WLStoragePostgresStore(url: cluster.url, namespace: namespace).encrypted(with: key)
        let stored = try (0..<200).map { try reader.read(key: "k\($0)").map { String(decoding: $0, as: UTF8.self) } }
        #expect(stored == (0..<200).map { String($0) }, "\(child.printedErrors)")
    }
}
