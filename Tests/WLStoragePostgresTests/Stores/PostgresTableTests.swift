import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// The store's table: which one a store uses, that it is made when missing, and that a role that may only read and
/// write it uses it. One test at a time: two change the privileges of the schema `public`, and grants made at once fail
/// with "tuple concurrently updated".
@Suite(.onTestThreads, .serialized, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresTableTests {
    /// A name no other test uses, a valid SQL identifier.
    private static func uniqueName(_ prefix: String) -> String {
        "\(prefix)_\(UInt32.random(in: 0...UInt32.max))"
    }

    @Test func aRoleThatMayOnlyReadAndWriteAnExistingTableUsesIt() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let table = Self.uniqueName("wls_grants")
        let role = Self.uniqueName("wls_writer")
        try sqlValue(
            admin,
            """
            CREATE TABLE public.\(table) (namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, \
            version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, key))
            """)
        try sqlValue(admin, "CREATE ROLE \(role) LOGIN")
        try sqlValue(admin, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        try sqlValue(admin, "GRANT USAGE ON SCHEMA public TO \(role)")
        try sqlValue(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON public.\(table) TO \(role)")
        defer {
            _ = try? sqlValue(admin, "DROP TABLE public.\(table)")
            _ = try? sqlValue(admin, "DROP ROLE \(role)")
        }
        // The role may not create anything in the schema.
        #expect(try sqlValue(admin, "SELECT has_schema_privilege('\(role)', 'public', 'CREATE')::text") == "false")

        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(
            url: cluster.connectionURL(user: role), namespace: namespace, table: table)
        try store.write(key: "a", data: bytes("1"))
        #expect(try store.read(key: "a") == bytes("1"))
        #expect(try store.create(key: "b", data: bytes("2")))
        #expect(try store.write(key: "a", data: bytes("3"), ifItHolds: bytes("1")))
        try store.write([
            WLStorageStoreWrite(key: "c", data: bytes("4")), WLStorageStoreWrite(key: "d", data: bytes("5")),
        ])
        #expect(try store.keys() == ["a", "b", "c", "d"])
        try store.remove(key: "b")
        #expect(try store.keys() == ["a", "c", "d"])
    }

    @Test func aCreationOfTheTableThatFailsWithADuplicateObjectIsTriedAgain() throws {
        let cluster = try PostgresCluster.shared()
        let database = Self.uniqueName("wls_race")
        let admin = try adminConnection(cluster.url)
        try sqlValue(admin, "CREATE DATABASE \(database)")
        defer { _ = try? sqlValue(admin, "DROP DATABASE \(database) WITH (FORCE)") }
        // In that database, the first creation of a table fails as a creation beaten by another one can: with the
        // row type already there (42710).
        let inDatabase = try adminConnection(cluster.connectionURL(database: database))
        try sqlValue(inDatabase, "CREATE SEQUENCE creations")
        try sqlValue(
            inDatabase,
            """
            CREATE FUNCTION refuse_first_creation() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN \
            IF nextval('creations') = 1 THEN \
            RAISE EXCEPTION 'type "wlstorage" already exists' USING ERRCODE = '42710'; END IF; END $$
            """)
        try sqlValue(
            inDatabase,
            """
            CREATE EVENT TRIGGER refuse_first_creation ON ddl_command_start WHEN TAG IN ('CREATE TABLE') \
            EXECUTE FUNCTION refuse_first_creation()
            """)
        inDatabase.close()

        let store = try WLStoragePostgresStore(url: cluster.connectionURL(database: database))
        try store.write(key: "k", data: bytes("v"))
        #expect(try store.read(key: "k") == bytes("v"))
    }

    @Test func storesThatDifferOnlyInTheirSearchPathUseTheTablesOfTheirSchemas() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let prod = Self.uniqueName("wls_prod")
        let staging = Self.uniqueName("wls_staging")
        try sqlValue(admin, "CREATE SCHEMA \(prod)")
        try sqlValue(admin, "CREATE SCHEMA \(staging)")
        defer {
            _ = try? sqlValue(admin, "DROP SCHEMA \(prod) CASCADE")
            _ = try? sqlValue(admin, "DROP SCHEMA \(staging) CASCADE")
        }
        let namespace = uniqueNamespace()
        let stagingStore = try WLStoragePostgresStore(
            url: cluster.connectionURL(options: "-c search_path=\(staging)"), namespace: namespace)
        let prodStore = try WLStoragePostgresStore(
            url: cluster.connectionURL(options: "-c search_path=\(prod)"), namespace: namespace)
        #expect(stagingStore.identity != prodStore.identity)

        ReportedErrors.install()
        let stagingStorage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: stagingStore)
        let prodStorage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: prodStore)
        prodStorage.wrappedValue = 7
        prodStorage.flush()
        #expect(stagingStorage.wrappedValue == 0)
        let query = "SELECT convert_from(value, 'UTF8') FROM %@.wlstorage WHERE namespace = $1 AND key = 'k'"
        #expect(try sqlValue(admin, query.replacingOccurrences(of: "%@", with: prod), [namespace]) == "7")
        #expect(try sqlValue(admin, query.replacingOccurrences(of: "%@", with: staging), [namespace]) != "7")
    }

    /// The table as an earlier version of the store made it, without `recent_tags` nor `<table>_writes`.
    private static func createTableWithoutTags(_ admin: PostgresConnection, _ table: String) throws {
        try sqlValue(
            admin,
            """
            CREATE TABLE public.\(table) (namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, \
            version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, key))
            """)
    }

    @Test func aTableMadeByAnEarlierVersionGetsTheTableOfWriteTagsFromAStoreThatMayCreateIt() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let table = Self.uniqueName("wls_untagged")
        try Self.createTableWithoutTags(admin, table)
        defer { _ = try? sqlValue(admin, "DROP TABLE public.\(table), public.\(table)_writes") }
        try sqlValue(admin, "INSERT INTO public.\(table) (namespace, key, value, version) VALUES ('n', 'k', '5', 1)")

        ReportedErrors.install()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: "n", table: table)
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        storage.update { $0 += 1 }
        #expect(storage.lastError == nil, "\(String(describing: storage.lastError))")
        #expect(
            try sqlValue(admin, "SELECT convert_from(value, 'UTF8') || ' ' || version FROM public.\(table)") == "6 2")
        // The update's write recorded its tag, written and not claimed.
        #expect(
            try sqlValue(admin, "SELECT count(*)::text || ' ' || bool_or(claimed) FROM public.\(table)_writes")
                == "1 false")
    }

    @Test func aRoleThatMayNotCreateTheTableOfWriteTagsIsToldTheStatementAndUpdatesByComparingBytes() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let table = Self.uniqueName("wls_untagged")
        let role = Self.uniqueName("wls_writer")
        try Self.createTableWithoutTags(admin, table)
        try sqlValue(admin, "CREATE ROLE \(role) LOGIN")
        try sqlValue(admin, "GRANT USAGE ON SCHEMA public TO \(role)")
        try sqlValue(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON public.\(table) TO \(role)")
        defer {
            _ = try? sqlValue(admin, "DROP TABLE public.\(table)")
            _ = try? sqlValue(admin, "DROP ROLE \(role)")
        }

        ReportedErrors.install()
        let store = try WLStoragePostgresStore(
            url: cluster.connectionURL(user: role), namespace: uniqueNamespace(), table: table)
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        for _ in 0..<3 { storage.update { $0 += 1 } }
        // What the storage's first update reported (a later read may have cleared its last error since).
        guard case .untagged(let error) = try store.readVersioned(key: "k") else {
            Issue.record("the store tags writes without a table of write tags")
            return
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("CREATE TABLE IF NOT EXISTS \"\(table)_writes\""), "\(error)")
        #expect(try sqlValue(admin, "SELECT convert_from(value, 'UTF8') FROM public.\(table)") == "3")
        #expect(try sqlValue(admin, "SELECT to_regclass('public.\(table)_writes')::text") == nil)
    }

    @Test func aStoreWhoseTableOfWriteTagsIsAnotherStoresTableWritesUntagged() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let table = Self.uniqueName("wls_named")
        defer { _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes, \(table)_writes_writes") }
        let first = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: table + "_writes")
        #expect(try first.write(key: "k", data: bytes("1"), ifItHolds: nil))

        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: table)
        #expect(try store.write(key: "k", data: bytes("1"), ifItHolds: nil))
        #expect(try store.write(key: "k", data: bytes("2"), ifItHolds: bytes("1")))
        guard case .untagged = try store.readVersioned(key: "k") else {
            Issue.record("the store tags writes in another store's table")
            return
        }
        #expect(try first.read(key: "k") == bytes("1"))
    }

    /// A schema of its own (grants on `public` race other tests') with a table and its table of write tags, and a role
    /// that may write the table and has `privileges` on the table of write tags; returns the table, `schema.name`.
    private static func tableWithTagsAndRole(
        _ admin: PostgresConnection, _ role: String, privileges: String
    ) throws -> String {
        let schema = uniqueName("wls_tags")
        let table = "\(schema).wlstorage"
        try sqlValue(admin, "CREATE SCHEMA \(schema)")
        try sqlValue(admin, WLStoragePostgresStore.Statements(table: table).createTable)
        try sqlValue(admin, WLStoragePostgresStore.Statements(table: table).createWrites)
        try sqlValue(admin, "CREATE ROLE \(role) LOGIN")
        try sqlValue(admin, "GRANT USAGE ON SCHEMA \(schema) TO \(role)")
        try sqlValue(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON \(table) TO \(role)")
        try sqlValue(admin, "GRANT \(privileges) ON \(table)_writes TO \(role)")
        return table
    }

    /// An unlogged table of tags is emptied by a crash of the server (and is empty on a promoted standby): the tag of a
    /// write made whose answer the crash lost would be gone, the write told not made, and an update made twice. A store
    /// records no tags there: it writes untagged, and says why.
    @Test func aStoreWhoseTableOfWriteTagsIsUnloggedWritesUntagged() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace())
        #expect(try store.read(key: "k") == nil)
        var admin = try adminConnection(cluster.url)
        try sqlValue(admin, "ALTER TABLE wlstorage_writes SET UNLOGGED")
        try sqlValue(admin, "INSERT INTO wlstorage_writes (tag) VALUES ('made')")
        admin.close()
        try cluster.restart(mode: .immediate)
        admin = try adminConnection(cluster.url)
        defer { admin.close() }
        #expect(try sqlValue(admin, "SELECT count(*)::text FROM wlstorage_writes") == "0", "the crash kept the tag")

        let fresh = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace())
        #expect(try fresh.create(key: "k", data: bytes("1")))
        #expect(try fresh.write(key: "k", data: bytes("2"), ifItHolds: bytes("1")))
        guard case .untagged(let error) = try fresh.readVersioned(key: "k") else {
            Issue.record("the store tags writes in an unlogged table")
            return
        }
        #expect(error.message.contains("unlogged"), "\(error.message)")
        #expect(try sqlValue(admin, "SELECT count(*)::text FROM wlstorage_writes") == "0")
    }

    @Test func aRoleThatMayOnlyReadTheTableOfWriteTagsWritesUntagged() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let role = Self.uniqueName("wls_writer")
        let table = try Self.tableWithTagsAndRole(admin, role, privileges: "SELECT")
        defer {
            _ = try? sqlValue(admin, "DROP SCHEMA \(table.prefix { $0 != "." }) CASCADE")
            _ = try? sqlValue(admin, "DROP ROLE \(role)")
        }

        let store = try WLStoragePostgresStore(
            url: cluster.connectionURL(user: role), namespace: uniqueNamespace(), table: table)
        #expect(try store.create(key: "k", data: bytes("1")))
        #expect(try store.write(key: "k", data: bytes("2"), ifItHolds: bytes("1")))
        guard case .untagged = try store.readVersioned(key: "k") else {
            Issue.record("the store tags writes in a table the role may only read")
            return
        }
        #expect(try store.read(key: "k") == bytes("2"))
    }

    @Test func aRoleWhosePrivilegesOnTheTableOfWriteTagsAreRevokedWritesUntaggedFromThen() throws {
        let cluster = try PostgresCluster.shared()
        let admin = try adminConnection(cluster.url)
        let role = Self.uniqueName("wls_writer")
        let table = try Self.tableWithTagsAndRole(admin, role, privileges: "SELECT, INSERT, UPDATE, DELETE")
        defer {
            _ = try? sqlValue(admin, "DROP SCHEMA \(table.prefix { $0 != "." }) CASCADE")
            _ = try? sqlValue(admin, "DROP ROLE \(role)")
        }

        ReportedErrors.install()
        let store = try WLStoragePostgresStore(
            url: cluster.connectionURL(user: role), namespace: uniqueNamespace(), table: table)
        #expect(try store.write(key: "k", data: bytes("1"), ifItHolds: nil))
        guard case .found = try store.readVersioned(key: "k") else {
            Issue.record("the store does not tag writes in a table the role may write")
            return
        }
        try sqlValue(admin, "REVOKE ALL ON \(table)_writes FROM \(role)")
        #expect(try store.write(key: "k", data: bytes("2"), ifItHolds: bytes("1")))
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        storage.update { $0 += 1 }
        #expect(try store.read(key: "k") == bytes("3"))
        guard case .untagged = try store.readVersioned(key: "k") else {
            Issue.record("the store tags writes in a table the role may no longer write")
            return
        }
    }
}
