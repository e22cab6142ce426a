import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

/// Storages over rows that hold what no storage writes: nothing at all, bytes that are no JSON, keys no file could have.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresUnusualStoredBytesTests {
    /// Handles of one namespace with identities of their own, as programs' stores are to one process.
    private func handles(_ count: Int, _ name: String) throws -> [WLStoragePostgresStore] {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace(name)
        return try (1...count).map { spellings in
            let hosts = Array(repeating: cluster.directory.path, count: spellings).joined(separator: ",")
            let ports = Array(repeating: String(cluster.port), count: spellings).joined(separator: ",")
            return try WLStoragePostgresStore(
                url: "postgresql:///postgres?host=\(hosts)&port=\(ports)&user=postgres", namespace: namespace,
                timeout: .seconds(10))
        }
    }

    private func stores(_ name: String = #function) throws -> (WLStoragePostgresStore, WLStoragePostgresStore) {
        let handles = try handles(2, name)
        return (handles[0], handles[1])
    }

    @Test func updatesOfTwoProgramsOverAnEmptyRowCountFromTheDefaultOnce() throws {
        let handles = try handles(3, #function)
        let (store, other, outside) = (handles[0], handles[1], handles[2])
        try store.write(key: "count", data: Data())
        let first = WLStorage(key: "count", defaultValue: 10, flushInterval: 0, store: store)
        let second = WLStorage(key: "count", defaultValue: 10, flushInterval: 0, store: other)
        #expect(first.wrappedValue == 10 && second.wrappedValue == 10)
        let counting = startThread { for _ in 0..<20 { first.update { $0 += 1 } } }
        for _ in 0..<20 { second.update { $0 += 1 } }
        counting.wait()
        #expect(try store.read(key: "count") == bytes("50"))
        #expect(
            first.lastError == nil && second.lastError == nil,
            "\(first.lastError?.message ?? "") \(second.lastError?.message ?? "")")
        // Emptied by another program while both run: each goes back to its default, and a set is written.
        try outside.write(key: "count", data: Data())
        #expect(
            eventually(timeout: 60) { first.wrappedValue == 10 && second.wrappedValue == 10 },
            "\(first.wrappedValue) \(second.wrappedValue)")
        second.wrappedValue = 7
        second.flush()
        #expect(try store.read(key: "count") == bytes("7"))
        #expect(eventually(timeout: 60) { first.wrappedValue == 7 })
    }

    @Test func bytesThatAreNoJSONStoredByAnotherProgramAreReportedAndNeverTakenAsTheValue() throws {
        let (store, other) = try stores()
        let storage = WLStorage(key: "cursor", defaultValue: 0, flushInterval: 0, store: store)
        storage.wrappedValue = 5
        storage.flush()
        // Another program stores bytes that are no JSON: the running storage keeps its value and says so.
        try other.write(key: "cursor", data: bytes("{not json"))
        #expect(eventually(timeout: 60) { storage.lastError?.code == .decodingFailed }, "the bytes were not reported")
        #expect(storage.wrappedValue == 5)
        #expect(try store.read(key: "cursor") == bytes("{not json"), "reading replaced them")
        // An update cannot read them either: it is made in this process, as a set, and says so.
        storage.update { $0 += 1 }
        storage.flush()
        #expect(storage.wrappedValue == 6)
        #expect(try store.read(key: "cursor") == bytes("6"))
    }

    /// A row changed by hand to bytes that are no JSON (an UPDATE sends no notification: no storage hears of it): the
    /// next set, written on condition, finds them, keeps a copy of them under another key, then replaces them.
    @Test func aSetOverARowChangedByHandToBytesThatAreNoJSONKeepsACopyOfThem() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace, timeout: .seconds(10))
        let storage = WLStorage(
            key: "prefs", defaultValue: ["theme": "light"], flushInterval: nil, store: store)
        storage.wrappedValue = ["theme": "dark"]
        storage.flush()
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        try sqlValue(
            admin, "UPDATE wlstorage SET value = convert_to($2, 'UTF8') WHERE namespace = $1 AND key = 'prefs'",
            [namespace, #"{"theme":"blue""#])
        storage.wrappedValue["size"] = "large"
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let stored = try JSONDecoder().decode([String: String].self, from: try #require(try store.read(key: "prefs")))
        #expect(stored["size"] == "large")
        let copies = try store.keys().filter { $0.hasPrefix("prefs~corrupt-") }.map { try store.read(key: $0) }
        #expect(copies == [bytes(#"{"theme":"blue""#)], "kept aside: \(copies)")
    }

    @Test func keysNoFileCouldHaveAreKeysOfTheirOwn() throws {
        let (store, other) = try stores()
        let keys = ["a/b", "..", "../x", "/", "", String(repeating: "k", count: 2_000), "é\u{301}", " "]
        for (index, key) in keys.enumerated() {
            let storage = WLStorage(key: key, defaultValue: -1, flushInterval: 0, store: store)
            storage.wrappedValue = index
            storage.flush()
            #expect(storage.lastError == nil, "\(key.prefix(20)): \(storage.lastError?.message ?? "")")
        }
        for (index, key) in keys.enumerated() {
            let reader = WLStorage(key: key, defaultValue: -1, flushInterval: 0, store: other)
            #expect(reader.wrappedValue == index, "\(key.prefix(20))")
            reader.update { $0 += 100 }
            #expect(try store.read(key: key) == bytes("\(index + 100)"), "\(key.prefix(20))")
        }
        // A NUL cannot be in a PostgreSQL text: the write fails, says why, and stays pending.
        let nul = WLStorage(key: "a\u{0}b", defaultValue: 0, flushInterval: 0, store: store)
        nul.wrappedValue = 1
        nul.flush()
        #expect(nul.hasPendingChanges && nul.lastError != nil)
        #expect(try store.read(key: "a") == nil)
    }

    /// A storage of a key with a NUL, which a PostgreSQL store cannot hold, has a change pending (an object, or a number)
    /// when every storage is flushed: the others of the store are written all the same (at exit, they would be lost),
    /// objects and numbers, and only its change stays pending, reported.
    @Test(arguments: [true, false])
    func aKeyWithNULLeavesTheOtherChangesOfAFlushOfEveryStorageWritten(nulHoldsAnObject: Bool) throws {
        struct Prefs: Codable, Sendable, Equatable {
            var theme = "light"
            var fontSize = 13
        }
        let (store, other) = try stores()
        for key in ["a", "b"] { try other.write(key: key, data: bytes(#"{"fontSize":15,"theme":"dark"}"#)) }
        try other.write(key: "n", data: bytes("1"))
        let objects = ["a", "b"].map { WLStorage(key: $0, defaultValue: Prefs(), flushInterval: nil, store: store) }
        let number = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
        let nulObject = WLStorage(key: "o\u{0}", defaultValue: Prefs(), flushInterval: nil, store: store)
        let nulNumber = WLStorage(key: "n\u{0}", defaultValue: 0, flushInterval: nil, store: store)
        try #require(objects.allSatisfy { $0.wrappedValue.theme == "dark" } && number.wrappedValue == 1)
        #expect(nulObject.wrappedValue == Prefs() && nulNumber.wrappedValue == 0)
        func idle<T>(_ storage: WLStorage<T>) -> Bool { storage.cell.state.withLock { !$0.isBusy } }
        #expect(eventually { objects.allSatisfy(idle) && idle(number) && idle(nulObject) && idle(nulNumber) })
        for storage in objects { storage.wrappedValue.theme = "blue" }
        number.wrappedValue = 2
        if nulHoldsAnObject { nulObject.wrappedValue.theme = "blue" } else { nulNumber.wrappedValue = 2 }
        ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
        for (key, storage) in zip(["a", "b"], objects) {
            #expect(!storage.hasPendingChanges, "\(key): \(String(describing: storage.lastError))")
            #expect(try other.read(key: key) == bytes(#"{"fontSize":15,"theme":"blue"}"#), "\(key)")
        }
        #expect(!number.hasPendingChanges, "\(String(describing: number.lastError))")
        #expect(try other.read(key: "n") == bytes("2"))
        let nul = nulHoldsAnObject ? nulObject.hasPendingChanges : nulNumber.hasPendingChanges
        #expect(nul)
    }

    /// As above, with a key too long for the table's index (its bytes do not compress), whose row the server refuses:
    /// the other changes of the store are written all the same, objects and numbers, and only its change stays pending.
    @Test(arguments: [true, false])
    func aKeyTooLongForTheIndexLeavesTheOtherChangesOfAFlushOfEveryStorageWritten(longHoldsAnObject: Bool) throws {
        struct Prefs: Codable, Sendable, Equatable {
            var theme = "light"
            var fontSize = 13
        }
        let (store, other) = try stores()
        var random = SystemRandomNumberGenerator()
        let long =
            "long-" + (0..<8_000).map { _ in String(UInt8.random(in: 0..<16, using: &random), radix: 16) }.joined()
        for key in ["a", "b"] { try other.write(key: key, data: bytes(#"{"fontSize":15,"theme":"dark"}"#)) }
        try other.write(key: "n", data: bytes("1"))
        let objects = ["a", "b"].map { WLStorage(key: $0, defaultValue: Prefs(), flushInterval: nil, store: store) }
        let number = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
        let longObject = WLStorage(key: long + "o", defaultValue: Prefs(), flushInterval: nil, store: store)
        let longNumber = WLStorage(key: long + "n", defaultValue: 0, flushInterval: nil, store: store)
        try #require(objects.allSatisfy { $0.wrappedValue.theme == "dark" } && number.wrappedValue == 1)
        #expect(longObject.wrappedValue == Prefs() && longNumber.wrappedValue == 0)
        func idle<T>(_ storage: WLStorage<T>) -> Bool { storage.cell.state.withLock { !$0.isBusy } }
        #expect(eventually { objects.allSatisfy(idle) && idle(number) && idle(longObject) && idle(longNumber) })
        for storage in objects { storage.wrappedValue.theme = "blue" }
        number.wrappedValue = 2
        if longHoldsAnObject { longObject.wrappedValue.theme = "blue" } else { longNumber.wrappedValue = 2 }
        ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
        for (key, storage) in zip(["a", "b"], objects) {
            #expect(!storage.hasPendingChanges, "\(key): \(String(describing: storage.lastError))")
            #expect(try other.read(key: key) == bytes(#"{"fontSize":15,"theme":"blue"}"#), "\(key)")
        }
        #expect(!number.hasPendingChanges, "\(String(describing: number.lastError))")
        #expect(try other.read(key: "n") == bytes("2"))
        #expect(longHoldsAnObject ? longObject.hasPendingChanges : longNumber.hasPendingChanges)
    }

    /// Objects over rows of empty bytes (read as nothing stored) and over no row at all are flushed with every storage:
    /// the batch on condition, which creates where no row is, refuses the empty rows, and their own writes replace
    /// the empty bytes; nothing stays pending and each row holds its object once.
    @Test func objectsOverEmptyRowsAndNoRowsAreWrittenByAFlushOfEveryStorage() throws {
        struct Prefs: Codable, Sendable, Equatable {
            var theme = "light"
            var fontSize = 13
        }
        let (store, other) = try stores()
        let keys = (0..<6).map { "p\($0)" }
        for key in keys where key < "p3" { try other.write(key: key, data: Data()) }
        let storages = keys.map { WLStorage(key: $0, defaultValue: Prefs(), flushInterval: nil, store: store) }
        #expect(storages.allSatisfy { $0.wrappedValue == Prefs() })
        func idle<T>(_ storage: WLStorage<T>) -> Bool { storage.cell.state.withLock { !$0.isBusy } }
        #expect(eventually { storages.allSatisfy(idle) })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.fontSize = 20 + index }
        ShutdownHandling.flushEverything(only: { $0.storeKey?.store == store.identity })
        for (index, (key, storage)) in zip(keys, storages).enumerated() {
            #expect(!storage.hasPendingChanges, "\(key): \(String(describing: storage.lastError))")
            let row = try other.read(key: key).map { String(decoding: $0, as: UTF8.self) }
            #expect(row == #"{"fontSize":\#(20 + index),"theme":"light"}"#, "\(key)")
        }
    }
}
