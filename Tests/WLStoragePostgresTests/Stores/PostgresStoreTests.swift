import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// The store against a real server shared by the suite: each test works in namespaces (or a table) of its own.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresStoreTests {
    private func store(
        _ namespace: String, table: String = "wlstorage", timeout: Duration = .seconds(10)
    ) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(
            url: try PostgresCluster.shared().url, namespace: namespace, table: table, timeout: timeout)
    }

    @Test func writesAreReadBackListedAndRemoved() throws {
        let store = try store(uniqueNamespace())
        #expect(try store.read(key: "a") == nil)
        #expect(try store.keys() == [])
        try store.write(key: "a", data: bytes("1"))
        try store.write(key: "b", data: bytes("2"))
        try store.write(key: "a", data: bytes("3"))
        #expect(try store.read(key: "a") == bytes("3"))
        #expect(try store.read(key: "b") == bytes("2"))
        #expect(try store.keys() == ["a", "b"])
        try store.remove(key: "a")
        try store.remove(key: "never-written")
        #expect(try store.read(key: "a") == nil)
        #expect(try store.keys() == ["b"])
        // Empty and binary values are kept byte for byte.
        try store.write(key: "empty", data: Data())
        #expect(try store.read(key: "empty") == Data())
        let binary = Data((0...255).map { UInt8($0) })
        try store.write(key: "binary", data: binary)
        #expect(try store.read(key: "binary") == binary)
    }

    /// A write says the row's version after it, as a read does: 1 when made, one more at each write, 1 again once
    /// the row is made anew.
    @Test func aWriteSaysTheVersionItMade() throws {
        let store = try store(uniqueNamespace())
        #expect(try store.writeWithVersion(key: "k", data: bytes("1")) == 1)
        #expect(try store.writeWithVersion(key: "k", data: bytes("2")) == 2)
        #expect(try store.readWithVersion(key: "k")?.version == 2)
        try store.remove(key: "k")
        #expect(try store.writeWithVersion(key: "k", data: bytes("3")) == 1)
    }

    @Test func createStoresOnlyWhereNothingIsStored() throws {
        let store = try store(uniqueNamespace())
        #expect(try store.create(key: "k", data: bytes("first")))
        #expect(try !store.create(key: "k", data: bytes("second")))
        #expect(try store.read(key: "k") == bytes("first"))
        try store.write(key: "k", data: bytes("written"))
        #expect(try !store.create(key: "k", data: bytes("third")))
        #expect(try store.read(key: "k") == bytes("written"))
        try store.remove(key: "k")
        #expect(try store.create(key: "k", data: bytes("again")))
        #expect(try store.read(key: "k") == bytes("again"))
    }

    @Test func aConditionalRemovalRemovesOnlyTheBytesItWasGiven() throws {
        let namespace = uniqueNamespace()
        let store = try store(namespace)
        let feed = try FeedRecorder(try self.store(namespace))
        try store.write(key: "k", data: bytes("old"))
        #expect(try !store.remove(key: "k", ifItHolds: bytes("other")))
        #expect(try store.read(key: "k") == bytes("old"))
        #expect(try store.remove(key: "k", ifItHolds: bytes("old")))
        #expect(try store.read(key: "k") == nil)
        #expect(try !store.remove(key: "k", ifItHolds: bytes("old")))
        #expect(feed.waitFor(.key("k")))
    }

    @Test func aConditionalWriteStoresOnlyOverTheBytesItWasGivenAndNotifiesWhenItDoes() throws {
        let namespace = uniqueNamespace()
        let store = try store(namespace)
        let feed = try FeedRecorder(try self.store(namespace))
        // `nil`: only where there is no row.
        #expect(try store.write(key: "k", data: bytes("1"), ifItHolds: nil))
        #expect(try !store.write(key: "k", data: bytes("2"), ifItHolds: nil))
        #expect(try store.read(key: "k") == bytes("1"))
        #expect(feed.waitFor(.key("k")))
        feed.clear()
        #expect(try !store.write(key: "k", data: bytes("2"), ifItHolds: bytes("other")))
        #expect(try store.read(key: "k") == bytes("1"))
        #expect(try store.write(key: "k", data: bytes("2"), ifItHolds: bytes("1")))
        #expect(try store.read(key: "k") == bytes("2"))
        #expect(feed.waitFor(.key("k")))
        // A removed row holds nothing: bytes are not matched.
        try store.remove(key: "k")
        #expect(try !store.write(key: "k", data: bytes("3"), ifItHolds: bytes("2")))
        #expect(try store.read(key: "k") == nil)
    }

    @Test func aBatchIsWrittenWholeOrNotAtAll() throws {
        let namespace = uniqueNamespace()
        let store = try store(namespace)
        let other = try self.store(namespace)
        let feed = try FeedRecorder(other)
        try store.write(key: "kept", data: bytes("before"))
        // A key whose random bytes do not compress is too large for the primary key's index: the server refuses it.
        let refused = (0..<5_000).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
        let failing = [
            WLStorageStoreWrite(key: "kept", data: bytes("after")),
            WLStorageStoreWrite(key: "new", data: bytes("new")),
            WLStorageStoreWrite(key: refused, data: bytes("refused")),
        ]
        #expect(throws: WLStorageError.self) { try store.write(failing) }
        #expect(try store.read(key: "kept") == bytes("before"))
        #expect(try store.read(key: "new") == nil)
        #expect(try store.keys() == ["kept"])

        // The connection is usable after the rollback, and a good batch is stored and notified whole.
        try store.write([
            WLStorageStoreWrite(key: "kept", data: bytes("after")),
            WLStorageStoreWrite(key: "new", data: bytes("new")),
        ])
        #expect(try store.read(key: "kept") == bytes("after"))
        #expect(try store.read(key: "new") == bytes("new"))
        #expect(feed.waitFor(.key("kept")))
        #expect(feed.waitFor(.key("new")))
    }

    @Test func anotherStoreSeesWritesAndItsFeedReportsThemButNotItsOwn() throws {
        let namespace = uniqueNamespace()
        let first = try store(namespace)
        let second = try store(namespace)
        let firstFeed = try FeedRecorder(first)
        let secondFeed = try FeedRecorder(second)

        let ownReplaced = try replacesItsConnection(first) { try first.write(key: "own", data: bytes("1")) }
        #expect(try second.read(key: "own") == bytes("1"))
        let theirsReplaced = try replacesItsConnection(second) { try second.write(key: "theirs", data: bytes("2")) }
        #expect(firstFeed.waitForChange(of: "theirs"))
        #expect(secondFeed.waitForChange(of: "own"))
        // Notifications arrive in commit order: the first store's own write was delivered before the second's. A
        // store's own write is reported only when its writing connection was replaced before the feed heard it.
        #expect(ownReplaced || !firstFeed.reported.contains(.key("own")), "\(firstFeed.reported)")
        #expect(theirsReplaced || !secondFeed.reported.contains(.key("theirs")), "\(secondFeed.reported)")
        // What the feed reported, or made to read again, is there.
        #expect(try first.read(key: "theirs") == bytes("2"))

        #expect(try second.create(key: "created", data: bytes("3")))
        #expect(firstFeed.waitForChange(of: "created"))
        try second.remove(key: "own")
        firstFeed.clear()
        try second.write(key: "marker", data: bytes("4"))
        #expect(firstFeed.waitForChange(of: "marker"))
        #expect(try first.read(key: "own") == nil)

        // A cancelled feed reports nothing more.
        firstFeed.cancel()
        firstFeed.clear()
        try second.write(key: "after-cancel", data: bytes("5"))
        #expect(secondFeed.waitFor(.key("own")))
        #expect(try first.read(key: "after-cancel") == bytes("5"))
        #expect(firstFeed.reported.isEmpty)
    }

    /// Runs `write` on `store`, and returns whether the store's writing connection was replaced meanwhile. A write
    /// whose answer is lost is sent again on a new connection, and the first one may have been committed: the feed
    /// reports that one, made by a server process that is no longer the store's (see `observeChanges`).
    private func replacesItsConnection(_ store: WLStoragePostgresStore, _ write: () throws -> Void) throws -> Bool {
        let before = store.writerPID.value
        try write()
        return before != nil && store.writerPID.value != before
    }

    @Test func namespacesAreIsolated() throws {
        let (namespaceA, namespaceB) = (uniqueNamespace(), uniqueNamespace())
        let a = try store(namespaceA)
        let b = try store(namespaceB)
        let writerB = try store(namespaceB)
        let feedB = try FeedRecorder(b)
        try a.write(key: "shared-name", data: bytes("a"))
        #expect(try b.read(key: "shared-name") == nil)
        try writerB.write(key: "shared-name", data: bytes("b"))
        #expect(try a.read(key: "shared-name") == bytes("a"))
        #expect(try b.read(key: "shared-name") == bytes("b"))
        #expect(try a.keys() == ["shared-name"])
        try a.remove(key: "shared-name")
        #expect(try b.read(key: "shared-name") == bytes("b"))
        try writerB.write(key: "marker", data: bytes("m"))
        #expect(feedB.waitFor(.key("marker")))
        // Only namespace B's changes: the write and the removal in A were not reported to B.
        #expect(feedB.reported.filter { $0 != .everything } == [.key("shared-name"), .key("marker")])
    }

    @Test(arguments: [
        "ünïcødé ключ 鍵 🔑", "it's \"quoted\"", #"back\slash"#, "'; DROP TABLE wlstorage; --", "  spaced  ",
        "new\nline\ttab", "$1", "%s%n", "k:3:abc", "*:0:",
    ])
    func oddKeysRoundTripAndAreReported(key: String) throws {
        let namespace = uniqueNamespace("odd")
        let store = try store(namespace)
        let other = try self.store(namespace)
        let feed = try FeedRecorder(other)
        try store.write(key: key, data: bytes(key))
        #expect(try other.read(key: key) == bytes(key))
        #expect(try other.keys() == [key])
        #expect(feed.waitFor(.key(key)))
        try store.remove(key: key)
        #expect(try other.read(key: key) == nil)
    }

    @Test func aKeyTooLongForANotificationIsReportedAsEverything() throws {
        let namespace = uniqueNamespace()
        let store = try store(namespace)
        let other = try self.store(namespace)
        let feed = try FeedRecorder(other)
        feed.clear()
        // More than 8,000 bytes, and compressible enough for the primary key's index.
        let key = "long-" + String(repeating: "ab€", count: 2_000)
        #expect(key.utf8.count > 8_000)
        try store.write(key: key, data: bytes("long"))
        #expect(try other.read(key: key) == bytes("long"))
        #expect(try other.keys() == [key])
        #expect(feed.waitFor(.everything))
        try store.remove(key: key)
        #expect(try other.read(key: key) == nil)
    }

    @Test func aKeyTooLongForTheTablesIndexIsRefusedClearly() throws {
        let store = try store(uniqueNamespace())
        // Random letters do not compress below the index's limit of about 2,700 bytes.
        var generator = SystemRandomNumberGenerator()
        let key = String(
            (0..<4_000).map { _ in Character(UnicodeScalar(UInt8.random(in: 33...126, using: &generator))) })
        let error = try #require(throws: WLStorageError.self) { try store.write(key: key, data: bytes("x")) }
        #expect(error.code == .writeFailed)
        #expect(error.message.contains("too long"), "\(error.message)")
        // The store goes on working.
        try store.write(key: "short", data: bytes("y"))
        #expect(try store.read(key: "short") == bytes("y"))
    }

    @Test func aKeyWithNULIsRefusedClearly() throws {
        let store = try store(uniqueNamespace())
        let error = try #require(throws: WLStorageError.self) { try store.write(key: "a\u{0}b", data: bytes("x")) }
        #expect(error.code == .writeFailed)
        #expect(error.message.contains("NUL"))
        #expect(throws: WLStorageError.self) { try store.read(key: "a\u{0}b") }
    }

    @Test func aTableOfItsOwnIsCreatedWithItsNameQuoted() throws {
        let table = "Custom_\(UInt32.random(in: 0...UInt32.max))"
        let store = try store("default", table: table)
        let other = try self.store("default", table: table)
        let feed = try FeedRecorder(other)
        try store.write(key: "k", data: bytes("v"))
        #expect(try other.read(key: "k") == bytes("v"))
        #expect(feed.waitFor(.key("k")))
        #expect(store.identity.hasSuffix("?table=\(table)#default"))
        // The default table does not hold it.
        #expect(try self.store("default").read(key: "k") == nil)
    }

    @Test func aStatementBlockedByALockThrowsAfterTheTimeoutAndTheStoreRecovers() throws {
        let namespace = uniqueNamespace()
        let store = try store(namespace, timeout: .seconds(1))
        // The calls that must succeed are tried until they do: on a loaded machine, connecting may take longer than
        // the second this store allows a call. Only the blocked write must end at its timeout.
        func succeeds(_ call: () throws -> Void) -> Bool { eventually(timeout: 60) { (try? call()) != nil } }
        try #require(succeeds { try store.write(key: "locked", data: bytes("before")) })

        // Another connection holds the row's lock in an open transaction: the upsert waits for it.
        let url = try PostgresCluster.shared().url
        let blocker = PostgresConnection(settings: try PostgresSettings(url: url, timeout: .seconds(10)))
        let deadline = { ContinuousClock.now + .seconds(10) }
        try blocker.connect(deadline: deadline())
        _ = try blocker.query("BEGIN", deadline: deadline())
        _ = try blocker.query(
            "SELECT value FROM wlstorage WHERE namespace = $1 AND key = $2 FOR UPDATE",
            [.text(namespace), .text("locked")], deadline: deadline())

        let error = try #require(throws: WLStorageError.self) { try store.write(key: "locked", data: bytes("after")) }
        #expect(error.code == .writeFailed)
        #expect(error.message.contains("did not answer in time"), "\(error)")
        // Reads are not blocked by the lock, and the store connects again for them.
        #expect(eventually(timeout: 60) { (try? store.read(key: "locked")) == bytes("before") })

        _ = try blocker.query("COMMIT", deadline: deadline())
        blocker.close()
        #expect(succeeds { try store.write(key: "locked", data: bytes("after")) })
        #expect(eventually(timeout: 60) { (try? store.read(key: "locked")) == bytes("after") })
    }

    @Test func aRowLargerThanTheLargestValueIsRefusedWithoutBeingFetched() throws {
        let namespace = uniqueNamespace()
        let store = try store(namespace)
        #expect(try store.keys() == [])  // the table is made
        let admin = try adminConnection(try PostgresCluster.shared().url)
        // Written by hand: a store never writes a value over the limit.
        let size = WLStorageSystem.maximumValueSize + 64 * 1024
        try sqlValue(
            admin,
            "INSERT INTO wlstorage (namespace, key, value, version) VALUES ($1, 'big', convert_to(repeat('x', \(size)), 'UTF8'), 1)",
            [namespace])
        let error = try #require(throws: WLStorageError.self) { try store.read(key: "big") }
        #expect(error.code == .valueTooLarge, "\(error)")
        #expect(error.message.contains("\(size)"), "\(error)")
        // A value of the limit itself is read.
        try sqlValue(
            admin,
            "UPDATE wlstorage SET value = convert_to(repeat('x', \(WLStorageSystem.maximumValueSize)), 'UTF8') WHERE namespace = $1",
            [namespace])
        #expect(try store.read(key: "big")?.count == WLStorageSystem.maximumValueSize)
    }

    @Test func theIdentityNamesServerDatabaseTableAndNamespace() throws {
        let store = try WLStoragePostgresStore(
            url: "postgresql://ada:s3cret@db.example.com:6543/app", namespace: "prod/eu", table: "settings")
        #expect(store.identity == "postgresql://db.example.com:6543/app?table=settings#prod%2Feu")
        #expect(store.description == "WLStoragePostgresStore(\(store.identity))")
        let keywords = try WLStoragePostgresStore(url: "host=/run/x port=7 dbname=d password=s3cret")
        #expect(keywords.identity == "postgresql://%2Frun%2Fx:7/d?table=wlstorage#default")
        // A primary and its standbys: each server with its port, as a URI lists them.
        let servers = try WLStoragePostgresStore(url: "postgresql://a.example.com:5433,b.example.com/app")
        #expect(servers.identity == "postgresql://a.example.com:5433,b.example.com:5432/app?table=wlstorage#default")
        let sockets = try WLStoragePostgresStore(url: "host=/run/a,/run/b port=1,2 dbname=d")
        #expect(sockets.identity == "postgresql://%2Frun%2Fa:1,%2Frun%2Fb:2/d?table=wlstorage#default")
    }

    @Test func aConnectionStringGivenAsTheDatabaseNameShowsNoPasswordInTheIdentityOrAnError() throws {
        let cluster = try PostgresCluster.shared()
        for database in [
            "postgresql://ada:s3cret@db.example.com/app", "host=db.example.com password=s3cret dbname=app",
        ] {
            let url = "host=\(cluster.directory.path) port=\(cluster.port) user=postgres dbname='\(database)'"
            let store = try WLStoragePostgresStore(url: url, timeout: .seconds(60))
            #expect(!store.identity.contains("s3cret"), "\(store.identity)")
            #expect(!store.description.contains("s3cret"), "\(store.description)")
            // The server refuses the database, and its message quotes the name.
            let error = try #require(serverRefusal { _ = try store.read(key: "k") }, "the read did not fail")
            #expect(error.message.contains("does not exist"), "\(error)")
            #expect(!"\(error)".contains("s3cret"), "\(error)")
        }
    }

    @Test func theIdentityOfATableNamedWithoutItsSchemaCarriesTheSearchPathTheConnectionSets() throws {
        let plain = try WLStoragePostgresStore(url: "host=/run/x dbname=d")
        let staging = try WLStoragePostgresStore(url: "host=/run/x dbname=d options='-c search_path=staging'")
        let prod = try WLStoragePostgresStore(url: "host=/run/x dbname=d options=--search-path=prod")
        #expect(plain.identity == "postgresql://%2Frun%2Fx:5432/d?table=wlstorage#default")
        #expect(staging.identity == "postgresql://%2Frun%2Fx:5432/d?table=wlstorage&search_path=staging#default")
        #expect(prod.identity == "postgresql://%2Frun%2Fx:5432/d?table=wlstorage&search_path=prod#default")
        // A table named with its schema is that table, whatever the search path.
        let named = try WLStoragePostgresStore(
            url: "host=/run/x dbname=d options='-c search_path=staging'", table: "prod.wlstorage")
        #expect(named.identity == "postgresql://%2Frun%2Fx:5432/d?table=prod.wlstorage#default")
    }
}
