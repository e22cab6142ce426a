import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// What a batch of several chunks keeps, sent in one pipeline: every key stored and notified once, chunks committed
/// in order, none run after one that fails, the count of what was stored when it fails or runs out of time, and every
/// byte over a slow network.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresBatchTests {
    /// `count` writes, `kN` holding `N`.
    private static func numbered(_ count: Int) -> [WLStorageStoreWrite] {
        (0..<count).map { WLStorageStoreWrite(key: "k\($0)", data: bytes("\($0)")) }
    }

    /// A key too long for the table's index (its bytes do not compress): the server refuses its row.
    private static func refusedKey() -> String {
        var random = SystemRandomNumberGenerator()
        return "long-" + (0..<8_000).map { _ in String(UInt8.random(in: 0..<16, using: &random), radix: 16) }.joined()
    }

    private static func count(_ connection: PostgresConnection, _ namespace: String, _ condition: String = "true")
        throws -> Int
    {
        Int(
            try sqlValue(
                connection, "SELECT count(*)::text FROM wlstorage WHERE namespace = $1 AND \(condition)", [namespace])
                ?? "") ?? -1
    }

    /// The rows of `namespace` whose value is the number its key names (`kN` holds `N`).
    private static func rowsHoldingTheirNumber(_ connection: PostgresConnection, _ namespace: String) throws -> Int {
        try count(
            connection, namespace, "CASE WHEN key LIKE 'k%' THEN convert_from(value, 'UTF8') = substr(key, 2) END")
    }

    private static func writeFailure(_ body: () throws -> Void) throws -> WLStorageError {
        var thrown: WLStorageError?
        do {
            try body()
        } catch let error as WLStorageError {
            thrown = error
        }
        return try #require(thrown, "the batch did not fail")
    }

    @Test func aBatchOfManyChunksStoresEveryKeyAndNotifiesEachOnce() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let listener = try adminConnection(url)
        _ = try listener.query("LISTEN wlstorage_changes", deadline: .now + .seconds(10))
        let count = WLStoragePostgresStore.batchRows * 5 + 7
        let batch = Self.numbered(count)
        #expect(WLStoragePostgresStore.chunks(of: batch).count == 6)
        try store.write(batch)
        // The end of what the batch notified: notifications arrive in the order of the commits.
        try store.write(key: "end", data: bytes("0"))
        var announced: [String: Int] = [:]
        let ended = try eventuallyThrowing(timeout: 60) {
            for notification in try listener.notifications() {
                guard
                    case .change(.key(let key)) = WLStoragePostgresStore.change(
                        fromPayload: notification.payload, namespace: namespace, table: nil)
                else { continue }
                announced[key, default: 0] += 1
            }
            return announced["end"] != nil
        }
        #expect(ended, "the last write was not announced")
        announced["end"] = nil
        #expect(Set(announced.keys) == Set(batch.map(\.key)))
        #expect(announced.values.allSatisfy { $0 == 1 }, "\(announced.filter { $0.value != 1 })")
        let admin = try adminConnection(url)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == count)
        #expect(try Self.count(admin, namespace, "version = 1") == count + 1)
        // Written again: each row one version more.
        try store.write(batch)
        #expect(try Self.count(admin, namespace, "version = 2") == count)
    }

    @Test func aChunkThatFailsIsRolledBackAndNoChunkAfterItRuns() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let rows = WLStoragePostgresStore.batchRows
        // Three chunks; the refused key is in the middle of the second.
        var batch = Self.numbered(rows * 3)
        batch[rows + rows / 2] = WLStorageStoreWrite(key: Self.refusedKey(), data: bytes("0"))
        #expect(WLStoragePostgresStore.chunks(of: batch).count == 3)
        let error = try Self.writeFailure { try store.write(batch) }
        #expect(error.code == .writeFailed)
        #expect(error.storedWrites == rows)
        #expect(error.message.contains("\(rows) of the batch's \(rows * 3) values were stored"), "\(error.message)")
        let admin = try adminConnection(url)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == rows)
        #expect(try Self.count(admin, namespace) == rows, "a chunk after the failed one ran")
        // The connection is out of the failed transaction: the next calls work on it.
        try store.write(key: "after", data: bytes("1"))
        batch[rows + rows / 2] = WLStorageStoreWrite(key: "k\(rows + rows / 2)", data: bytes("\(rows + rows / 2)"))
        try store.write(batch)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == rows * 3)
    }

    @Test func aChunkBlockedPastTheDeadlineKeepsTheChunksCommittedBeforeItAndSaysHowMany() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        // The deadline must leave the first chunk time to commit, on a loaded machine and server too; the second
        // chunk waits for it whatever its length.
        let store = try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10))
        let rows = WLStoragePostgresStore.batchRows
        let batch = Self.numbered(rows * 3)
        let blocked = "k\(rows + 1)"
        try store.write(key: blocked, data: bytes("before"))
        // Another program holds the row of a key of the second chunk: the chunk waits for it past the deadline.
        let admin = try adminConnection(url)
        _ = try admin.query("BEGIN", deadline: .now + .seconds(10))
        #expect(
            try sqlValue(
                admin, "SELECT key FROM wlstorage WHERE namespace = $1 AND key = $2 FOR UPDATE", [namespace, blocked])
                == blocked)
        let error = try Self.writeFailure { try store.write(batch) }
        // The store cancels the chunk at the deadline, from another thread; once the cancellation has reached the
        // server, nothing waits for the row, and the server has skipped the chunks after it.
        #expect(
            try eventuallyThrowing(timeout: 60) {
                try sqlValue(
                    admin,
                    "SELECT count(*)::text FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))")
                    == "0"
            })
        _ = try admin.query("ROLLBACK", deadline: .now + .seconds(10))
        #expect(error.code == .writeFailed)
        // The first chunk's commit was confirmed before the deadline, not at the end of the pipeline.
        #expect(error.storedWrites == rows, "\(error.message)")
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == rows)
        #expect(try store.read(key: blocked) == bytes("before"))
        #expect(try store.read(key: "k\(rows * 2)") == nil)
        try store.write(batch)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == rows * 3)
    }

    /// A batch on condition of three chunks (500, 500, 1 rows), each row in one of six cases: a row holding the bytes
    /// expected (written, a value equal to them too), holding others (refused), none where none is expected (made,
    /// empty bytes too), one where none is expected (refused), none where bytes are expected (refused), and empty bytes
    /// expected of a row holding them (written). Each answer is the row's; written rows gain a version, others keep
    /// theirs. A chunk refused by the server throws, the chunks before it committed.
    @Test func aBatchOnConditionOfSeveralChunksWritesExactlyTheRowsHoldingWhatEachExpects() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let rows = WLStoragePostgresStore.batchRows
        let count = rows * 2 + 1
        // Case of key N: N % 6. Stored beforehand: cases 0, 1, 3 and 5.
        func key(_ index: Int) -> String { String(format: "c%05d", index) }
        try store.write(
            (0..<count).compactMap { index -> WLStorageStoreWrite? in
                switch index % 6 {
                case 0, 1, 3: WLStorageStoreWrite(key: key(index), data: bytes("old\(index)"))
                case 5: WLStorageStoreWrite(key: key(index), data: Data())
                default: nil
                }
            })
        let batch = (0..<count).map { index in
            WLStorageStoreWrite(
                key: key(index),
                data: index % 12 == 0 ? bytes("old\(index)") : index % 12 == 2 ? Data() : bytes("new\(index)"))
        }
        let expected: [Data?] = (0..<count).map { index in
            switch index % 6 {
            case 0: bytes("old\(index)")
            case 1: bytes("other\(index)")
            case 2, 3: nil
            case 4: bytes("old\(index)")
            default: Data()
            }
        }
        #expect(WLStoragePostgresStore.chunks(of: batch).map(\.count) == [rows, rows, 1])
        let written = try store.write(batch, ifTheyHold: expected)
        #expect(written == (0..<count).map { [0, 2, 5].contains($0 % 6) })
        let admin = try adminConnection(url)
        defer { admin.close() }
        for index in 0..<count {
            let row = try store.read(key: key(index))
            let version = try sqlValue(
                admin, "SELECT version::text FROM wlstorage WHERE namespace = $1 AND key = $2", [namespace, key(index)])
            switch index % 6 {
            case 0, 5: #expect(row == batch[index].data && version == "2", "\(index)")
            case 2: #expect(row == batch[index].data && version == "1", "\(index)")
            case 1, 3: #expect(row == bytes("old\(index)") && version == "1", "\(index)")
            default: #expect(row == nil, "\(index)")
            }
        }
        // The second chunk refused by the server: the first one's rows are written but one whose row holds other
        // bytes, the others not, and the error gives the first chunk's answers.
        var failing = batch.map { WLStorageStoreWrite(key: $0.key, data: bytes("again")) }
        failing[rows + 1] = WLStorageStoreWrite(key: Self.refusedKey(), data: bytes("0"))
        let holding = (0..<count).map { try? store.read(key: key($0)) }
        var expectedAgain = holding
        expectedAgain[3] = bytes("other")
        expectedAgain[rows + 1] = nil  // made where no row is: its index entry is refused
        #expect {
            try store.write(failing, ifTheyHold: expectedAgain)
        } throws: { error in
            (error as? WLStorageError)?.storedAnswers == (0..<rows).map { $0 != 3 }
        }
        #expect(try (0..<rows).allSatisfy { try store.read(key: key($0)) == ($0 == 3 ? holding[3] : bytes("again")) })
        #expect(try (rows..<count).allSatisfy { try store.read(key: key($0)) == holding[$0] })
    }

    @Test(.enabled(if: LatencyProxy.isAvailable, "python3 is needed for the proxy"))
    func aBatchOfLargeValuesOverASlowNetworkStoresEveryByte() throws {
        let cluster = try PostgresCluster.shared()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        try proxy.delay(milliseconds: 20)
        let namespace = uniqueNamespace()
        let url = "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres"
        let store = try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(60))
        // Values of 1 MiB, several chunks of them by their bytes, then small ones.
        let large = (0..<8).map { index in
            WLStorageStoreWrite(
                key: "large\(index)",
                data: Data((0..<1_048_576).map { UInt8(truncatingIfNeeded: ($0 &+ index) &* 2_654_435_761 >> 13) }))
        }
        let batch = large + Self.numbered(WLStoragePostgresStore.batchRows * 2)
        #expect(WLStoragePostgresStore.chunks(of: batch).count >= 4)
        try store.write(batch)
        for write in large {
            #expect(try store.read(key: write.key) == write.data, "\(write.key)")
        }
        let admin = try adminConnection(cluster.url)
        #expect(try Self.rowsHoldingTheirNumber(admin, namespace) == WLStoragePostgresStore.batchRows * 2)
    }
}
