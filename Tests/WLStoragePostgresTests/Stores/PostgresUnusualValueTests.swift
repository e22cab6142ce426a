import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Batches of nothing or of duplicates, a NUL in a key, empty and large values, and strange namespaces.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresUnusualValueTests: PostgresFaultSuite {
    @Test func batchesOfNothingOfDuplicatesAndWithANulKey() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try store.write([])
        try store.write(key: "kept", data: bytes("before"))
        try store.write([
            WLStorageStoreWrite(key: "d", data: bytes("1")), .init(key: "d", data: bytes("2")),
            .init(key: "d", data: bytes("3")),
        ])
        #expect(try store.read(key: "d") == bytes("3"))
        let error = try #require(throws: WLStorageError.self) {
            try store.write([
                WLStorageStoreWrite(key: "kept", data: bytes("after")), .init(key: "a\u{0}b", data: bytes("x")),
                .init(key: "new", data: bytes("x")),
            ])
        }
        #expect(error.code == .writeFailed)
        #expect(try store.read(key: "kept") == bytes("before"))
        #expect(try store.read(key: "new") == nil)
        #expect(throws: WLStorageError.self) { try store.read(key: "\u{0}") }
        #expect(throws: WLStorageError.self) { try store.remove(key: "x\u{0}") }
        try store.write(key: "usable", data: bytes("yes"))
        #expect(try store.keys() == ["d", "kept", "usable"])
    }

    @Test func emptyAndLargeValuesAndStrangeNamespaces() throws {
        let cluster = try PostgresCluster.shared()
        let big = Data((0..<1_048_576).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) })
        for name in [
            "quote'\"s", "100%", "%s%n%x", "ünï©ødé 🎉", "back\\slash", ":", "1:", "k:1:x",
            String(repeating: "n", count: 1000),
        ] {
            let namespace = name + UUID().uuidString.prefix(4)
            let trimmed = namespace.utf8.count > 1000 ? String(name) : namespace
            let store = try WLStoragePostgresStore(url: cluster.url, namespace: trimmed)
            let other = try WLStoragePostgresStore(url: cluster.url, namespace: trimmed)
            let feed = try FeedRecorder(store)
            try other.write(key: "empty", data: Data())
            try other.write(key: "big", data: big)
            try other.write(key: "ключ'%", data: bytes("1"))
            #expect(try store.read(key: "empty") == Data())
            #expect(try store.read(key: "big") == big)
            #expect(try store.keys() == ["big", "empty", "ключ'%"])
            #expect(feed.waitFor(.key("ключ'%")), "\(trimmed)")
            #expect(feed.waitFor(.key("big")), "\(trimmed)")
            #expect(!store.identity.contains(" "))
        }
    }
}
