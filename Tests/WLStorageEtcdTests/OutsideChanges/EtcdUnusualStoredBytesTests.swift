import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Storages over etcd keys that hold what no storage writes (nothing at all, bytes that are no JSON), and keys no file
/// could have, each over handles with identities of their own, as programs' stores are to one process.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdUnusualStoredBytesTests {
    private static func handles(_ name: String = #function) throws -> [WLStorageEtcdStore] {
        let server = try EtcdServer.shared()
        let namespace = uniqueNamespace(name)
        return try [[server.endpoint], [server.otherSpelling], [server.endpoint, server.otherSpelling]].map {
            try WLStorageEtcdStore(endpoints: $0, namespace: namespace, timeout: .seconds(10))
        }
    }

    @Test func updatesOfTwoProgramsOverAnEmptyValueCountFromTheDefaultOnce() async throws {
        try await onItsOwnThread {
            let handles = try Self.handles()
            try handles[2].write(key: "count", data: Data())
            let first = WLStorage(key: "count", defaultValue: 10, flushInterval: 0, store: handles[0])
            let second = WLStorage(key: "count", defaultValue: 10, flushInterval: 0, store: handles[1])
            #expect(first.wrappedValue == 10 && second.wrappedValue == 10)
            let counting = startThread { for _ in 0..<20 { first.update { $0 += 1 } } }
            for _ in 0..<20 { second.update { $0 += 1 } }
            counting.wait()
            #expect(try handles[2].read(key: "count") == bytes("50"))
            #expect(first.lastError == nil && second.lastError == nil)
            // Emptied by another program while both run: each goes back to its default.
            try handles[2].write(key: "count", data: Data())
            #expect(
                eventually(timeout: 60) { first.wrappedValue == 10 && second.wrappedValue == 10 },
                "\(first.wrappedValue) \(second.wrappedValue)")
            second.wrappedValue = 7
            second.flush()
            #expect(try handles[2].read(key: "count") == bytes("7"))
            #expect(eventually(timeout: 60) { first.wrappedValue == 7 })
        }
    }

    @Test func bytesThatAreNoJSONStoredByAnotherProgramAreReportedAndNeverTakenAsTheValue() async throws {
        try await onItsOwnThread {
            let handles = try Self.handles()
            let storage = WLStorage(key: "cursor", defaultValue: 0, flushInterval: 0, store: handles[0])
            storage.wrappedValue = 5
            storage.flush()
            try handles[1].write(key: "cursor", data: bytes("{not json"))
            #expect(
                eventually(timeout: 60) { storage.lastError?.code == .decodingFailed }, "the bytes were not reported")
            #expect(storage.wrappedValue == 5)
            #expect(try handles[2].read(key: "cursor") == bytes("{not json"), "reading replaced them")
        }
    }

    @Test func keysNoFileCouldHaveAreKeysOfTheirOwn() async throws {
        try await onItsOwnThread {
            let handles = try Self.handles()
            let keys = ["a/b", "..", "../x", "/", "", String(repeating: "k", count: 5_000), "a\u{0}b", "a", " "]
            for (index, key) in keys.enumerated() {
                let storage = WLStorage(key: key, defaultValue: -1, flushInterval: 0, store: handles[0])
                storage.wrappedValue = index
                storage.flush()
                #expect(storage.lastError == nil, "\(key.prefix(20)): \(storage.lastError?.message ?? "")")
            }
            for (index, key) in keys.enumerated() {
                let reader = WLStorage(key: key, defaultValue: -1, flushInterval: 0, store: handles[1])
                #expect(reader.wrappedValue == index, "\(key.prefix(20))")
                reader.update { $0 += 100 }
                #expect(try handles[2].read(key: key) == bytes("\(index + 100)"), "\(key.prefix(20))")
            }
        }
    }
}
