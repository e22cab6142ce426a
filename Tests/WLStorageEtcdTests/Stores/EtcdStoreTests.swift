import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// The etcd store's calls against a real server: bytes in and out, conditions, batches, keys.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdStoreTests {
    private func makeStore(_ namespace: String, _ endpoint: String? = nil) throws -> WLStorageEtcdStore {
        try WLStorageEtcdStore(endpoints: [endpoint ?? EtcdServer.shared().endpoint], namespace: namespace)
    }

    @Test func theEtcdStoreKeepsTheContract() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            // Another program's write: a store of its own.
            let elsewhere = try makeStore(namespace, try EtcdServer.shared().otherSpelling)
            try StoreContract.check(try makeStore(namespace), other: try makeStore(namespace)) { key, data in
                try elsewhere.write(key: key, data: data)
            }
        }
    }

    @Test func readsWritesCreationsAndRemovalsRoundTrip() async throws {
        try await onItsOwnThread {
            #expect(isOnATestThreadOfItsOwn, "the test's calls block a thread of its own, not the pool's")
            let namespace = uniqueNamespace()
            let store = try makeStore(namespace)
            #expect(try store.read(key: "a/b") == nil)
            try store.write(key: "a/b", data: bytes("{\"x\":1}"))
            #expect(try store.read(key: "a/b") == bytes("{\"x\":1}"))
            try store.write(key: "empty", data: Data())
            #expect(try store.read(key: "empty") == Data(), "empty bytes are stored, not absent")
            #expect(try store.create(key: "a/b", data: bytes("2")) == false)
            #expect(try store.create(key: "c", data: bytes("3")) == true)
            #expect(try store.keys().sorted() == ["a/b", "c", "empty"])
            #expect(try store.remove(key: "c", ifItHolds: bytes("4")) == false)
            #expect(try store.remove(key: "c", ifItHolds: bytes("3")) == true)
            try store.remove(key: "a/b")
            try store.remove(key: "a/b")
            #expect(try store.read(key: "a/b") == nil)
            #expect(try store.keys() == ["empty"])
        }
    }

    /// Namespaces are kept apart, also where one is the start of another followed by `/`.
    @Test func namespacesThatLookNestedAreApart() async throws {
        try await onItsOwnThread {
            let base = uniqueNamespace()
            let outer = try makeStore(base)
            let inner = try makeStore(base + "/inner")
            try outer.write(key: "inner/k", data: bytes("1"))
            try inner.write(key: "k", data: bytes("2"))
            #expect(try outer.read(key: "inner/k") == bytes("1"))
            #expect(try inner.read(key: "k") == bytes("2"))
            #expect(try outer.keys() == ["inner/k"])
            #expect(try inner.keys() == ["k"])
        }
    }

    @Test func aConditionalWriteIsRefusedOnceTheKeyChanged() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let store = try makeStore(namespace)
            let other = try makeStore(namespace, try EtcdServer.shared().otherSpelling)
            #expect(try store.write(key: "k", data: bytes("1"), ifItHolds: nil) == true)
            let read = try #require(try store.read(key: "k"))
            // Another program writes between the read and the conditional write.
            try other.write(key: "k", data: bytes("2"))
            #expect(try store.write(key: "k", data: bytes("11"), ifItHolds: read) == false)
            #expect(try store.read(key: "k") == bytes("2"))
            #expect(try store.write(key: "k", data: bytes("3"), ifItHolds: nil) == false)
            #expect(try store.write(key: "k", data: bytes("3"), ifItHolds: bytes("2")) == true)
            #expect(try other.read(key: "k") == bytes("3"))
            // Empty bytes compare as bytes: they are not "nothing stored".
            try other.write(key: "e", data: Data())
            #expect(try store.write(key: "e", data: bytes("1"), ifItHolds: nil) == false)
            #expect(try store.write(key: "e", data: bytes("1"), ifItHolds: Data()) == true)
        }
    }

    /// Another program writes the key after the latest revision the store has seen: the fence refuses the store's
    /// next write of it, which is sent again with the revision of that refusal and stored (a plain write, a write that
    /// says its version, a removal, a conditional write whose condition holds); a conditional write whose condition
    /// does not hold is refused by its condition (and not stored), however the fence answered.
    @Test func aWriteOfAKeyWrittenElsewhereSinceIsStoredOnceTheFenceRefusedIt() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let store = try makeStore(namespace)
            let other = try makeStore(namespace, try EtcdServer.shared().otherSpelling)
            #expect(try store.read(key: "k") == nil)
            try other.write(key: "k", data: bytes("1"))
            try other.write(key: "k", data: bytes("2"))
            #expect(try store.writeWithVersion(key: "k", data: bytes("3")) == 3)
            try other.write(key: "k", data: bytes("4"))
            try store.write(key: "k", data: bytes("5"))
            #expect(try other.readWithVersion(key: "k")?.version == 5)
            try other.write(key: "k", data: bytes("6"))
            #expect(try store.write(key: "k", data: bytes("7"), ifItHolds: bytes("6")) == true)
            try other.write(key: "k", data: bytes("8"))
            #expect(try store.write(key: "k", data: bytes("9"), ifItHolds: bytes("7")) == false)
            #expect(try store.remove(key: "k", ifItHolds: bytes("7")) == false)
            #expect(try other.read(key: "k") == bytes("8"))
            try other.write(key: "k", data: bytes("9"))
            try store.remove(key: "k")
            #expect(try other.read(key: "k") == nil)
            try other.write(key: "k", data: bytes("10"))
            #expect(try store.remove(key: "k", ifItHolds: bytes("10")) == true)
            #expect(try other.read(key: "k") == nil)
        }
    }

    /// 300 writes, with keys written twice, are more operations than etcd takes in one transaction (128).
    @Test func aBatchLargerThanOneTransactionIsStoredWhole() async throws {
        try await onItsOwnThread {
            let store = try makeStore(uniqueNamespace())
            var batch = (0..<300).map { WLStorageStoreWrite(key: "k\($0)", data: bytes(String($0))) }
            batch += (0..<10).map { WLStorageStoreWrite(key: "k\($0)", data: bytes("again \($0)")) }
            batch.insert(WLStorageStoreWrite(key: "k5", data: bytes("first")), at: 3)
            try store.write(batch)
            #expect(try store.keys().count == 300)
            #expect(try store.read(key: "k5") == bytes("again 5"))
            #expect(try store.read(key: "k299") == bytes("299"))
        }
    }

    /// Another program writes a key that sorts between two keys of a batch: the batch's first try, which compares the
    /// range from its first key to its last, is refused, and the next, which compares its own keys, stores it.
    @Test func aBatchIsStoredWhenAKeyAmongItsKeysWasWrittenSince() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let store = try makeStore(namespace)
            try store.write(key: "a", data: bytes("0"))
            try makeStore(namespace).write(key: "b", data: bytes("other"))
            try store.write([
                WLStorageStoreWrite(key: "a", data: bytes("1")), WLStorageStoreWrite(key: "c", data: bytes("1")),
            ])
            #expect(try store.read(key: "a") == bytes("1"))
            #expect(try store.read(key: "b") == bytes("other"))
            #expect(try store.read(key: "c") == bytes("1"))
        }
    }

    /// A write says the key's version after it, as a read does: 1 when made, one more at each write, 1 again once
    /// the key is made anew.
    @Test func aWriteSaysTheVersionItMade() async throws {
        try await onItsOwnThread {
            let store = try makeStore(uniqueNamespace())
            #expect(try store.writeWithVersion(key: "k", data: bytes("1")) == 1)
            #expect(try store.writeWithVersion(key: "k", data: bytes("2")) == 2)
            #expect(try store.readWithVersion(key: "k")?.version == 2)
            try store.remove(key: "k")
            #expect(try store.writeWithVersion(key: "k", data: bytes("3")) == 1)
        }
    }

    /// A key of 30,000 bytes, with bytes that bring its key and bytes to `maximumRequestBytes`: the write's transaction
    /// mentions the key in its put and its fence, under etcd's limit, and it is stored. A read of its version would
    /// mention it once more, past the limit: the write does not say its version. With fewer bytes, it does.
    @Test func aLongKeyWrittenWithBytesUpToTheLimitIsStored() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let store = try makeStore(namespace)
            let key = String(repeating: "k", count: 30_000)
            let size = WLStorageEtcdStore.maximumRequestBytes - "wlstorage/\(namespace)/".utf8.count - key.utf8.count
            let data = Data(repeating: UInt8(ascii: "x"), count: size)
            try store.write(key: key, data: data)
            #expect(try store.read(key: key) == data)
            #expect(try store.writeWithVersion(key: key, data: data) == nil)
            #expect(try store.read(key: key) == data)
            #expect(try store.writeWithVersion(key: "k", data: data.dropLast(100_000)) == 1)
        }
    }

    /// The third transaction of a batch holds a value larger than etcd takes in a request (1.5 MiB by default): the
    /// two before it are stored, and the error says so. The third is not sent: etcd's refusal would stop the program
    /// (see `WLStorageEtcdStore.maximumRequestBytes`).
    @Test func aBatchRefusedPartWaySaysHowManyWritesWereStored() async throws {
        try await onItsOwnThread {
            let store = try makeStore(uniqueNamespace())
            var batch = (0..<130).map { WLStorageStoreWrite(key: "k\($0)", data: bytes(String($0))) }
            batch.append(WLStorageStoreWrite(key: "large", data: Data(repeating: UInt8(ascii: "x"), count: 2 << 20)))
            batch.append(WLStorageStoreWrite(key: "after", data: bytes("1")))
            #expect {
                try store.write(batch)
            } throws: { error in
                guard let error = error as? WLStorageError else { return false }
                return error.code == .valueTooLarge && error.storedWrites == 130
            }
            #expect(try store.read(key: "k129") == bytes("129"))
            #expect(try store.read(key: "large") == nil)
            #expect(try store.read(key: "after") == nil)
        }
    }

    /// A value larger than one request may hold is refused before it is sent, by every kind of write.
    @Test func aValueTooLargeForOneRequestIsNotSent() async throws {
        try await onItsOwnThread {
            let store = try makeStore(uniqueNamespace())
            let large = Data(repeating: UInt8(ascii: "x"), count: WLStorageEtcdStore.maximumRequestBytes + 1)
            let calls: [() throws -> Void] = [
                { try store.write(key: "k", data: large) },
                { _ = try store.write(key: "k", data: large, ifItHolds: nil) },
                { _ = try store.create(key: "k", data: large) },
                { _ = try store.remove(key: "k", ifItHolds: large) },
                { try store.write([WLStorageStoreWrite(key: "k", data: large)]) },
            ]
            for call in calls {
                #expect {
                    try call()
                } throws: { error in
                    (error as? WLStorageError)?.code == .valueTooLarge
                }
            }
            // Just under the limit is stored, and read back.
            let fits = Data(repeating: UInt8(ascii: "y"), count: WLStorageEtcdStore.maximumRequestBytes - 100)
            try store.write(key: "k", data: fits)
            #expect(try store.read(key: "k") == fits)
        }
    }

    @Test func aServerThatCannotBeReachedFailsTheCallWithinTheTimeout() async throws {
        try await onItsOwnThread {
            // A port found free, on which nothing listens: refused at once.
            let server = try EtcdServer()
            defer { server.remove() }
            let store = try WLStorageEtcdStore(
                endpoints: [server.endpoint, server.alternateEndpoint], namespace: "n", timeout: .seconds(2))
            let start = ContinuousClock.now
            #expect {
                try store.read(key: "k")
            } throws: { error in
                (error as? WLStorageError)?.code == .readFailed
            }
            #expect {
                try store.write(key: "k", data: bytes("1"), ifItHolds: nil)
            } throws: { error in
                (error as? WLStorageError)?.code == .writeFailed
            }
            #expect(ContinuousClock.now - start < .seconds(30))
        }
    }
}
