import Foundation
import Testing
import WLStorageFleet
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Two programs change different fields of one key of PostgreSQL, with the server crashing between their writes: each
/// program's write goes onto the other's, whether or not its feed told of it before the crash, and whether it is written
/// by a flush or by the flush on SIGTERM, which writes every storage's change at once; a change pending across
/// another program's removal of the key goes onto what is stored since as the fields it changed; and a write whose
/// answer was lost is counted once: made (another program's newer change of the field stays), or not made and then never
/// made late.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFieldLevelWriteTests {
    struct Prefs: Codable, Sendable, Equatable {
        var theme = "light"
        var fontSize = 13
    }

    @Test func twoProgramsChangingDifferentFieldsAcrossAServerCrashKeepBothChanges() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let writer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        try writer.write(key: "prefs", data: bytes(#"{"fontSize":15,"theme":"dark"}"#))
        let a = WLStorage(
            key: "prefs", defaultValue: Prefs(), flushInterval: nil,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        let b = WLStorage(
            key: "prefs", defaultValue: Prefs(), flushInterval: nil,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        try #require(a.wrappedValue == Prefs(theme: "dark", fontSize: 15))
        try #require(b.wrappedValue == Prefs(theme: "dark", fontSize: 15))
        a.wrappedValue.theme = "blue"
        b.wrappedValue.fontSize = 20
        a.flush()
        #expect(a.lastError == nil)
        try cluster.restart(mode: .immediate)
        // The first tries may meet the restart: the change stays pending until a flush writes it.
        #expect(
            eventually(timeout: 120) {
                b.flush()
                return !b.hasPendingChanges
            }, "\(String(describing: b.lastError))")
        // A connection of its own for each read: a crash ends it.
        func row() throws -> String? {
            let admin = try adminConnection(cluster.url)
            defer { admin.close() }
            return try sqlValue(
                admin, "SELECT convert_from(value, 'UTF8') FROM wlstorage WHERE namespace = $1 AND key = $2",
                [namespace, "prefs"])
        }
        #expect(try row() == #"{"fontSize":20,"theme":"blue"}"#)
        // And again, the other way round, after another crash.
        a.wrappedValue.fontSize = 22
        try cluster.restart(mode: .immediate)
        b.wrappedValue.theme = "green"
        #expect(
            eventually(timeout: 120) {
                b.flush()
                return !b.hasPendingChanges
            }, "\(String(describing: b.lastError))")
        #expect(
            eventually(timeout: 120) {
                a.flush()
                return !a.hasPendingChanges
            }, "\(String(describing: a.lastError))")
        let text = try #require(try row())
        let stored = try JSONDecoder().decode(Prefs.self, from: Data(text.utf8))
        #expect(stored == Prefs(theme: "green", fontSize: 22), "the row holds \(text)")
        #expect(eventually(timeout: 120) { a.wrappedValue == stored && b.wrappedValue == stored })
    }

    /// A program (the test child's `--fleet` mode, a storage of an object of four fields, never flushed but at the end)
    /// has set three fields, and is ended by SIGTERM after another program set the fourth in a way its feed has not told
    /// of (plain SQL, which sends no notification): the flush on the signal writes the change on its own, onto the row
    /// as it is, and the row holds both programs' fields. Written whole in a batch, as the flush of every storage wrote
    /// a store's changes, the change replaced the other program's mode with the one it had read.
    @Test func theFlushOnSIGTERMKeepsAnotherProgramsChangeOfAnotherFieldThatItsFeedHasNotToldOf() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        func text(_ value: FleetValueV1) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }
        let first = FleetValueV1.made(by: 1)
        try other.write(key: "prefs", data: Data(try text(first).utf8))
        let child = try Replica(arguments: ["--fleet", cluster.url, namespace, "1", "none"], awaitingReady: false)
        child.send("open prefs")
        try #require(child.waitFor("opened \(try text(first)) none"), "\(child.printed) \(child.printedErrors)")
        // A set with stamp 3 changes the stamp, theme and font size; the mode stays comfortable, as read.
        let set = FleetValueV1.made(by: 3)
        try #require(set.mode == first.mode)
        child.send("set prefs 3")
        try #require(child.waitFor("set \(try text(set))"), "\(child.printed) \(child.printedErrors)")
        var changed = first
        changed.mode = .compact
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        try sqlValue(
            admin,
            """
            UPDATE wlstorage SET value = convert_to($3, 'UTF8'), version = version + 1, updated_at = now() \
            WHERE namespace = $1 AND key = $2
            """, [namespace, "prefs", try text(changed)])
        child.signal(SIGTERM)
        let end = child.waitForExit(timeout: 120)
        #expect(end?.reason == .uncaughtSignal && end?.status == SIGTERM, "\(child.printedErrors)")
        let row = try #require(try other.read(key: "prefs"))
        var both = set
        both.mode = .compact
        #expect(
            try JSONDecoder().decode(FleetValueV1.self, from: row) == both,
            "the row holds \(String(decoding: row, as: UTF8.self)); \(child.printedErrors)")
    }

    /// A program (the test child's `--fleet` mode) has set three fields of an object it read, and the server ends its
    /// store's writing connection, idle (as a restart, a pooler or a firewall does), before it is ended by SIGTERM. The
    /// flush on the signal writes the change (a batch on condition sent on the ended connection fails at once, and is
    /// not resent: it may have been made), and the row holds it.
    @Test func theFlushOnSIGTERMWritesAnObjectAfterTheServerEndedTheIdleWritingConnection() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        func text(_ value: FleetValueV1) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }
        try other.write(key: "prefs", data: Data(try text(FleetValueV1.made(by: 1)).utf8))
        let child = try Replica(arguments: ["--fleet", cluster.url, namespace, "1", "none"], awaitingReady: false)
        child.send("open prefs")
        try #require(
            child.waitFor("opened \(try text(FleetValueV1.made(by: 1))) none"),
            "\(child.printed) \(child.printedErrors)")
        let set = FleetValueV1.made(by: 3)
        child.send("set prefs 3")
        try #require(child.waitFor("set \(try text(set))"), "\(child.printed) \(child.printedErrors)")
        // The writing connection's last statement is the read of the key; the listener's is not.
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        let writer = try #require(
            try sqlValue(
                admin,
                """
                SELECT pid::text FROM pg_stat_activity WHERE datname = 'postgres' AND pid <> pg_backend_pid() \
                AND query LIKE 'SELECT CASE WHEN octet_length(value)%'
                """), "\(child.printedErrors)")
        #expect(try sqlValue(admin, "SELECT pg_terminate_backend($1::int)::text", [writer]) == "true")
        let pid = try #require(pid_t(writer))
        #expect(eventually(timeout: 60) { kill(pid, 0) == -1 && errno == ESRCH })
        child.signal(SIGTERM)
        let end = child.waitForExit(timeout: 120)
        #expect(end?.reason == .uncaughtSignal && end?.status == SIGTERM, "\(child.printedErrors)")
        let reader = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(60))
        let row = try #require(try reader.read(key: "prefs"))
        #expect(
            try JSONDecoder().decode(FleetValueV1.self, from: row) == set,
            "the row holds \(String(decoding: row, as: UTF8.self)); \(child.printedErrors)")
    }

    /// Whether `storage` has heard the row as `other` reads it now: the version its backer last read, wrote or saw in a
    /// check is that row's (bytes alone, 0 for none), and no job of its cell runs, so the check that saw it has ended. A
    /// count of checks would not do: a check asked for before the change raises it too.
    private func hasHeardTheRow(_ storage: WLStorage<Prefs>, through other: WLStoragePostgresStore) -> Bool {
        guard let backer = storage.cell.keyBacker else { return false }
        let row: Data?
        do { row = try other.read(key: "prefs") } catch { return false }
        let last = backer.known.withLock { $0.last }
        guard (row.map { $0.isEmpty ? 0 : KnownVersions.stamp($0) } ?? 0) == last else { return false }
        return storage.cell.state.withLock { !$0.isBusy }
    }

    /// A change pending when another program removed the row, then stored it anew, goes onto the new row as the field it
    /// changed: the field it left as it read it keeps the other program's value (it was judged against the default, and
    /// the font size read went over the one stored since).
    @Test func aChangePendingAcrossARemovalGoesOntoTheRowStoredSinceAsItsChangedField() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let namespace = uniqueNamespace()
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        try other.write(key: "prefs", data: bytes(#"{"fontSize":15,"theme":"dark"}"#))
        let storage = WLStorage(
            key: "prefs", defaultValue: Prefs(), flushInterval: nil,
            store: try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10)))
        try #require(storage.wrappedValue == Prefs(theme: "dark", fontSize: 15))
        storage.wrappedValue.theme = "blue"
        for change in [nil, #"{"fontSize":20,"theme":"dark"}"#] {
            if let change { try other.write(key: "prefs", data: bytes(change)) } else { try other.remove(key: "prefs") }
            try #require(eventually(timeout: 60) { hasHeardTheRow(storage, through: other) })
        }
        storage.flush()
        #expect(storage.lastError == nil)
        let row = try other.read(key: "prefs").map { String(decoding: $0, as: UTF8.self) }
        #expect(row == #"{"fontSize":20,"theme":"blue"}"#)
    }

    /// A change's write commits and its answer is lost (the connection reset), while another program has set the same
    /// field again: the other program's value is newer and stays. The write's tag, recorded with it, tells the store
    /// that it was made; the storage ends holding what the row holds, with nothing pending.
    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func aWriteWhoseAnswerWasLostAfterItWasMadeIsNotMadeAgainOverAnotherProgramsNewerChange() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        // A table of its own: no other test's store removes its write tags.
        let table = "wls_lost_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try adminConnection(cluster.url)
        defer {
            _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes")
            admin.close()
        }
        let other = try WLStoragePostgresStore(
            url: cluster.url, namespace: namespace, table: table, timeout: .seconds(30))
        try other.write(key: "prefs", data: bytes(#"{"fontSize":15,"theme":"dark"}"#))
        let storage = WLStorage(
            key: "prefs", defaultValue: Prefs(), flushInterval: nil,
            store: try WLStoragePostgresStore(
                url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
                table: table, timeout: .seconds(30)))
        try #require(storage.wrappedValue == Prefs(theme: "dark", fontSize: 15))
        // The row held by another transaction: the storage's write is sent, and waits for it.
        _ = try admin.query("BEGIN", deadline: .now + .seconds(10))
        try sqlValue(
            admin, "SELECT key FROM \(table) WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, "prefs"])
        storage.wrappedValue.theme = "blue"
        let flushed = startThread { storage.flush() }
        #expect(
            try eventuallyThrowing(timeout: 60) {
                try sqlValue(
                    admin,
                    "SELECT count(*)::text FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))")
                    == "1"
            })
        // Its answer held by the proxy, the write commits; another program sets the theme again; the answer is lost.
        try proxy.freeze()
        _ = try admin.query("COMMIT", deadline: .now + .seconds(10))
        func row() throws -> String? { try other.read(key: "prefs").map { String(decoding: $0, as: UTF8.self) } }
        #expect(try eventuallyThrowing(timeout: 60) { try row() == #"{"fontSize":15,"theme":"blue"}"# })
        try other.write(key: "prefs", data: bytes(#"{"fontSize":15,"theme":"green"}"#))
        try proxy.cut()
        #expect(flushed.wait(timeout: .now() + 120) == .success)
        storage.flush()
        let text = try #require(try row())
        let tags = try sqlValue(
            admin,
            """
            SELECT (SELECT string_agg(claimed::text || ' ' || written_at::text, ', ') FROM \(table)_writes) \
            || '; row version ' || version || ' at ' || updated_at::text || '; now ' || now()::text FROM \(table)
            """)
        #expect(
            text == #"{"fontSize":15,"theme":"green"}"#,
            "tags (claimed, written at): \(tags ?? "none"); last error: \(String(describing: storage.lastError))")
        let stored = try JSONDecoder().decode(Prefs.self, from: Data(text.utf8))
        #expect(eventually(timeout: 60) { storage.wrappedValue == stored }, "holds \(storage.wrappedValue)")
        #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
    }

    /// As above, the change written by a flush of every storage, in its batch on condition: the batch commits and its
    /// answer is lost while another program has set the same field again. The change stays pending (the batch cannot
    /// tell what it stored), and its next write leaves the other program's newer value.
    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func aBatchOnConditionWhoseAnswerWasLostAfterItWasMadeIsNotMadeAgainOverAnotherProgramsNewerChange() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        try other.write(key: "prefs", data: bytes(#"{"fontSize":15,"theme":"dark"}"#))
        let store = try WLStoragePostgresStore(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
            timeout: .seconds(30))
        let storage = WLStorage(key: "prefs", defaultValue: Prefs(), flushInterval: nil, store: store)
        try #require(storage.wrappedValue == Prefs(theme: "dark", fontSize: 15))
        try #require(eventually { storage.cell.state.withLock { !$0.isBusy } })
        // The row held by another transaction: the batch is sent, and waits for it.
        _ = try admin.query("BEGIN", deadline: .now + .seconds(10))
        try sqlValue(
            admin, "SELECT key FROM wlstorage WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, "prefs"])
        storage.wrappedValue.theme = "blue"
        let flushed = startThread {
            ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
        }
        #expect(
            try eventuallyThrowing(timeout: 60) {
                try sqlValue(
                    admin,
                    "SELECT count(*)::text FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))")
                    == "1"
            })
        // Its answer held by the proxy, the batch commits; another program sets the theme again; the answer is lost.
        try proxy.freeze()
        _ = try admin.query("COMMIT", deadline: .now + .seconds(10))
        func row() throws -> String? { try other.read(key: "prefs").map { String(decoding: $0, as: UTF8.self) } }
        #expect(try eventuallyThrowing(timeout: 60) { try row() == #"{"fontSize":15,"theme":"blue"}"# })
        try other.write(key: "prefs", data: bytes(#"{"fontSize":15,"theme":"green"}"#))
        try proxy.cut()
        #expect(flushed.wait(timeout: .now() + 120) == .success)
        #expect(
            eventually(timeout: 60) {
                storage.flush()
                return !storage.hasPendingChanges
            }, "\(String(describing: storage.lastError))")
        #expect(try row() == #"{"fontSize":15,"theme":"green"}"#, "\(String(describing: storage.lastError))")
        #expect(eventually(timeout: 60) { storage.wrappedValue.theme == "green" }, "holds \(storage.wrappedValue)")
    }

    /// A change's write waits for a row another transaction holds, and its answer is lost: the store claims the write's
    /// tag and answers that it did not store. Run once the row is free, the write is refused for its tag, taken: the row
    /// keeps what it held, which the storage's next write goes onto.
    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func aWriteWhoseAnswerWasLostWhileItWaitedIsNotMadeOnceTheRowIsFree() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(30))
        try other.write(key: "prefs", data: bytes(#"{"theme":"dark"}"#))
        let store = try WLStoragePostgresStore(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
            timeout: .seconds(30))
        try #require(try store.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        let (stored, waiter) = try Self.writeWaitingForTheRow(
            of: store, table: "wlstorage", namespace: namespace, holder: admin, admin: admin, proxy: proxy)
        #expect(!stored, "the write's tag was claimed: it was not stored")
        // The row free, the write runs, and is refused; its server process then finds its connection gone.
        _ = try admin.query("COMMIT", deadline: .now + .seconds(10))
        let ended = "SELECT count(*)::text FROM pg_stat_activity WHERE pid = $1::int"
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, ended, [waiter]) == "0" })
        #expect(try other.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
    }

    /// As above, with the row held for longer than the hour unclaimed tags are kept (the claimed tag made older
    /// by as much, and a store's first write removing old tags): the claimed tag is kept, and the write, run once the
    /// row is free, is still refused for it.
    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func aWriteNotMadeForItsClaimedTagIsNotMadeOnceTheRowIsFreeAfterOldTagsWereRemoved() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let table = "wls_claimed_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try adminConnection(cluster.url)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, table: table)
        defer { _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes") }
        try other.write(key: "prefs", data: bytes(#"{"theme":"dark"}"#))
        let store = try WLStoragePostgresStore(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace,
            table: table, timeout: .seconds(30))
        try #require(try store.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
        let holder = try adminConnection(cluster.url)
        defer { holder.close() }
        let (stored, waiter) = try Self.writeWaitingForTheRow(
            of: store, table: table, namespace: namespace, holder: holder, admin: admin, proxy: proxy)
        #expect(!stored, "the write's tag was claimed: it was not stored")
        // 61 minutes on, a store's first write removes the tags older than an hour, a written one's among them.
        try sqlValue(admin, "INSERT INTO \(table)_writes (tag) VALUES ('written')")
        try sqlValue(admin, "UPDATE \(table)_writes SET written_at = written_at - interval '61 minutes'")
        let fresh = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, table: table)
        #expect(try fresh.write(key: "another", data: bytes("1"), ifItHolds: nil))
        #expect(try sqlValue(admin, "SELECT count(*)::text FROM \(table)_writes WHERE tag = 'written'") == "0")
        _ = try holder.query("COMMIT", deadline: .now + .seconds(10))
        let ended = "SELECT count(*)::text FROM pg_stat_activity WHERE pid = $1::int"
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, ended, [waiter]) == "0" })
        #expect(try other.read(key: "prefs") == bytes(#"{"theme":"dark"}"#))
    }

    /// Has `store` change the key `prefs` from dark to blue while `holder` holds its row (from here until it commits),
    /// and cuts the write's connection once it waits: returns what the write answered, and its server process.
    static func writeWaitingForTheRow(
        of store: WLStoragePostgresStore, table: String, namespace: String, holder: PostgresConnection,
        admin: PostgresConnection, proxy: LatencyProxy
    ) throws -> (stored: Bool, waiter: String) {
        _ = try holder.query("BEGIN", deadline: .now + .seconds(10))
        try sqlValue(
            holder, "SELECT key FROM \(table) WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, "prefs"])
        let outcome = HeldReference<Result<Bool, any Error>>()
        let written = startThread {
            outcome.hold(
                Result {
                    try store.write(
                        key: "prefs", data: bytes(#"{"theme":"blue"}"#), ifItHolds: bytes(#"{"theme":"dark"}"#))
                })
        }
        let waiting = "SELECT pid::text FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))"
        let holderPID = try #require(try sqlValue(holder, "SELECT pg_backend_pid()::text"))
        #expect(try eventuallyThrowing(timeout: 60) { try sqlValue(admin, waiting, [holderPID]) != nil })
        let waiter = try #require(try sqlValue(admin, waiting, [holderPID]))
        try proxy.cut()
        #expect(written.wait(timeout: .now() + 120) == .success)
        return (try #require(outcome.current).get(), waiter)
    }
}
