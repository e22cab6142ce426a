import Foundation
import Synchronization
import Testing
import WLStorage

@testable import WLStoragePostgres

/// Attacks on update() of an encrypted store over PostgreSQL (the store writes on condition).
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresAttack4Tests {
    private func store(_ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(
            url: try PostgresCluster.shared().url, namespace: namespace, table: "wlstorage", timeout: .seconds(10))
    }

    /// A key that holds empty bytes ("nothing stored") in the table, under an encrypted store: update() must end, as
    /// it does over the plain store.
    @Test func anUpdateOfAnEncryptedKeyHoldingEmptyBytesEnds() throws {
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let plain = try store(namespace)
        let encrypted = try store(namespace).encrypted(with: key)
        try encrypted.write(key: "n", data: bytes("5"))
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: encrypted)
        #expect(storage.wrappedValue == 5)
        // Another program empties the key.
        try plain.write(key: "n", data: Data())
        let done = Atomic<Bool>(false)
        Thread.detachNewThread {
            storage.update { $0 += 1 }
            done.store(true, ordering: .releasing)
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, !done.load(ordering: .acquiring) { usleep(10_000) }
        let ended = done.load(ordering: .acquiring)
        #expect(ended, "update() still running after 10 s: it retries its conditional write forever")
        if !ended {
            // Unblock it: an encrypted empty value opens to the empty bytes the update expects.
            try encrypted.write(key: "n", data: Data())
            let again = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < again, !done.load(ordering: .acquiring) { usleep(10_000) }
            let endedAtLast = done.load(ordering: .acquiring)
            #expect(endedAtLast)
        }
        #expect(storage.wrappedValue == 1)
        #expect(try encrypted.read(key: "n") == bytes("1"))
    }
}
