import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Writes the server refuses with an error of their statement (a trigger that raises, as a check, a full disk or a
/// timeout would): an update counts once or is reported not made, and is never made later; a set stays pending.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresRefusedWriteTests {
    /// A table of the test's own, whose writes (`rows`) or write tags (`tags`) a trigger refuses `times` times (-1:
    /// until `allow`), and its admin connection.
    private final class Refusing {
        let admin: PostgresConnection
        let table = "refusing_\(UInt32.random(in: 0...UInt32.max))"
        let store: WLStoragePostgresStore

        init(_ target: String, times: Int) throws {
            let cluster = try PostgresCluster.shared()
            admin = try adminConnection(cluster.url)
            store = try WLStoragePostgresStore(
                url: cluster.url, namespace: uniqueNamespace(), table: table, timeout: .seconds(10))
            try store.write(key: "n", data: bytes("1"))
            try store.write(key: "o", data: bytes(#"{"n":1}"#))
            let on = target == "rows" ? table : table + "_writes"
            let condition = times < 0 ? "true" : "nextval('\(table)_refusals') <= \(times)"
            try sqlValue(admin, "CREATE SEQUENCE \(table)_refusals")
            try sqlValue(
                admin,
                """
                CREATE FUNCTION \(table)_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                IF \(condition) THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$
                """)
            try sqlValue(
                admin,
                "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON \(on) FOR EACH ROW EXECUTE FUNCTION \(table)_refuse()"
            )
        }

        func allow() throws {
            try sqlValue(admin, "DROP TRIGGER IF EXISTS refuse ON \(table)")
            try sqlValue(admin, "DROP TRIGGER IF EXISTS refuse ON \(table)_writes")
        }

        var value: String? {
            get throws { try value(of: "n") }
        }

        func value(of key: String) throws -> String? {
            try sqlValue(admin, "SELECT convert_from(value, 'UTF8') FROM \(table) WHERE key = $1", [key])
        }

        deinit {
            _ = try? sqlValue(admin, "DROP TABLE \(table), \(table)_writes")
            admin.close()
        }
    }

    @Test(arguments: ["rows", "tags"])
    func anUpdateRefusedAFewTimesCountsOnce(target: String) throws {
        let refusing = try Refusing(target, times: 2)
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: refusing.store)
        storage.update { $0 += 1 }
        #expect(try refusing.value == "2", "\(storage.lastError?.message ?? "")")
        storage.update { $0 += 10 }
        #expect(try refusing.value == "12")
    }

    /// A refusal is no lost answer: the update is reported as not made (not as of unknown outcome, sent again and
    /// again), its value is left, and it is not made later.
    @Test(arguments: ["rows", "tags"])
    func anUpdateRefusedUntilItEndsIsReportedNotMadeAndNeverMadeLater(target: String) throws {
        let refusing = try Refusing(target, times: -1)
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: refusing.store)
        storage.update { $0 += 1 }
        let error = try #require(storage.lastError)
        #expect(error.code == .writeFailed && error.message.contains("refused by the test"), "\(error)")
        #expect(error.message.hasPrefix("the update was not made"), "\(error)")
        #expect(try refusing.value == "1")
        #expect(storage.wrappedValue == 1)
        try refusing.allow()
        storage.flush()
        storage.update { $0 += 10 }
        #expect(try refusing.value == "11")
        #expect(storage.wrappedValue == 11)
    }

    /// A set refused stays pending, and says why: for an object too, which is written on condition of what was read (a
    /// refusal is no other program's change, to merge onto again and again).
    @Test func aSetRefusedByTheServerStaysPendingAndIsWrittenOnceAllowed() throws {
        let refusing = try Refusing("rows", times: -1)
        let number = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: refusing.store)
        let object = WLStorage(key: "o", defaultValue: ["n": 0], flushInterval: nil, store: refusing.store)
        number.wrappedValue = 50
        object.wrappedValue = ["n": 50]
        number.flush()
        object.flush()
        for storage in [number.lastError, object.lastError] {
            #expect(storage?.message.contains("refused by the test") == true, "\(String(describing: storage))")
        }
        #expect(number.hasPendingChanges && object.hasPendingChanges)
        #expect(try refusing.value(of: "n") == "1" && refusing.value(of: "o") == #"{"n":1}"#)
        try refusing.allow()
        number.flush()
        object.flush()
        #expect(try refusing.value(of: "n") == "50" && refusing.value(of: "o") == #"{"n":50}"#)
    }
}
