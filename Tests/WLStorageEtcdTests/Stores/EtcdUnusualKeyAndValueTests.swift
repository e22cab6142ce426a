import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Keys with `/` and the empty key are keys like any other, kept apart from other namespaces' keys; a value larger
/// than one request to etcd may hold, or than ``WLStorageSystem/maximumValueSize``, is not sent, is said, stays pending,
/// and leaves what etcd holds as it was.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdUnusualKeyAndValueTests {
    @Test func keysWithSlashesAndTheEmptyKeyAreKeysOfTheirNamespaceAlone() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            // The namespace `<namespace>/x` is another: its key `k` is not `x/k` of `<namespace>`.
            let nested = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace + "/x")
            try store.write(key: "x/k", data: bytes("1"))
            try store.write(key: "", data: bytes("2"))
            try store.write(key: "/", data: bytes("3"))
            try nested.write(key: "k", data: bytes("4"))
            #expect(try store.read(key: "x/k") == bytes("1"))
            #expect(try store.read(key: "") == bytes("2"))
            #expect(try store.read(key: "/") == bytes("3"))
            #expect(try nested.read(key: "k") == bytes("4"))
            #expect(try store.keys().sorted() == ["", "/", "x/k"])
            #expect(try nested.keys() == ["k"])

            // Storages of those keys, one of them updated, over a second handle with an identity of its own.
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let slashed = WLStorage(key: "x/k", defaultValue: 0, flushInterval: 0, store: other)
            let empty = WLStorage(key: "", defaultValue: 0, flushInterval: 0, store: other)
            #expect(slashed.wrappedValue == 1 && empty.wrappedValue == 2)
            slashed.update { $0 += 10 }
            empty.update { $0 += 20 }
            slashed.flush()
            empty.flush()
            #expect(slashed.lastError == nil && empty.lastError == nil)
            #expect(try store.read(key: "x/k") == bytes("11"))
            #expect(try store.read(key: "") == bytes("22"))
            #expect(try nested.read(key: "k") == bytes("4"))
            try store.remove(key: "")
            #expect(try store.keys().sorted() == ["/", "x/k"])
            #expect(eventually(timeout: 60) { empty.wrappedValue == 0 }, "the removal was not heard")
        }
    }

    @Test func aValueLargerThanARequestMayHoldIsNotSentAndStaysPending() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let storage = WLStorage(key: "blob", defaultValue: "", flushInterval: nil, store: store)
            storage.wrappedValue = "small"
            storage.flush()
            let before = try #require(try rawEntry(in: server, namespace: namespace, key: "blob"))

            // Under the package's limit (16 MiB), over etcd's (1.5 MiB a request).
            let large = String(repeating: "x", count: 2_000_000)
            #expect(large.utf8.count < WLStorageSystem.maximumValueSize)
            #expect {
                try store.write(key: "blob", data: Data(large.utf8))
            } throws: { ($0 as? WLStorageError)?.code == .valueTooLarge }
            storage.wrappedValue = large
            storage.flush()
            #expect(storage.hasPendingChanges)
            #expect(storage.lastError?.code == .valueTooLarge, "\(String(describing: storage.lastError))")
            // An update to such a value is not made, and says why: the store was reached, and refused the value.
            storage.update { $0 += "y" }
            let refused = try #require(storage.lastError)
            #expect(refused.code == .valueTooLarge, "\(refused)")
            #expect(!refused.message.contains("could not be reached"), "\(refused.message)")

            // Over the package's limit: not even encoded for the store.
            storage.wrappedValue = String(repeating: "z", count: WLStorageSystem.maximumValueSize + 1)
            storage.flush()
            #expect(storage.hasPendingChanges)
            #expect(storage.lastError?.code == .valueTooLarge, "\(String(describing: storage.lastError))")
            let after = try #require(try rawEntry(in: server, namespace: namespace, key: "blob"))
            #expect(after.revision == before.revision && after.value == before.value, "etcd's value changed")

            // A value that fits is written again.
            storage.wrappedValue = "fits"
            storage.flush()
            #expect(!storage.hasPendingChanges && storage.lastError == nil)
            #expect(try rawEntry(in: server, namespace: namespace, key: "blob")?.value == bytes("\"fits\""))
        }
    }
}
