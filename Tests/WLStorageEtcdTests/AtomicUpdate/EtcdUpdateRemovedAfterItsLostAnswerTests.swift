import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// An update whose write was carried out and whose answer was lost, after which another program removed the key (and
/// its tags with it): the update cannot tell from the key whether it was stored, and is not made a second time.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdUpdateRemovedAfterItsLostAnswerTests {
    /// The errors reported for the store of `namespace`.
    private func errors(_ namespace: String) -> [WLStorageError] {
        ReportedErrors.errors { $0.message.contains(namespace) || ($0.path ?? "").contains(namespace) }
    }

    /// Where nothing was stored, at the store, as an update sends its write again (with the same tag) after its answer
    /// was lost: nothing is stored once more, so the copy sent again would store the value a second time, and undo the
    /// removal. It is not stored, and the key's trace tells nothing (an update then reports its outcome unknown).
    @Test func anUpdatesWriteWhereNothingWasStoredIsNotMadeAgainAfterItsKeyWasRemoved() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let seen = SeenBytes()
            relay.cutNextWrite(.answer) {
                // Another program finds the write stored, and removes the key (a reset of the counter).
                seen.bytes = try? other.read(key: "count")
                try? other.remove(key: "count")
            }
            let tag = WLStorageWriteTag(text: "lost")
            #expect(throws: WLStorageError.self) {
                _ = try store.write(key: "count", data: bytes("1"), ifVersion: nil, tag: tag)
            }
            #expect(relay.cutCount == 1, "the write's answer was cut")
            #expect(seen.bytes == bytes("1"), "the write was carried out")

            let again = try store.write(key: "count", data: bytes("1"), ifVersion: nil, tag: tag)
            if case .stored = again { Issue.record("the copy sent again was stored") }
            #expect(try store.trace(of: tag, key: "count") == nil)
            let entry = try rawEntry(in: server, namespace: namespace, key: "count")
            #expect(entry == nil, "the write was made again after the removal: \(String(describing: entry))")
        }
    }

    /// Where something was stored: the key made anew by another program after the removal holds none of the update's
    /// tags. The update must not take that for a write that was never stored, and run again on the new value.
    @Test func anUpdateIsNotMadeAgainOnAKeyRemovedAndMadeAnewAfterItsLostAnswer() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            try other.write(key: "count", data: bytes("10"))
            let storage = WLStorage(key: "count", defaultValue: 0, flushInterval: nil, store: store)
            let seen = SeenBytes()
            relay.cutNextWrite(.answer) {
                seen.bytes = try? other.read(key: "count")
                try? other.remove(key: "count")
                try? other.write(key: "count", data: bytes("100"))
            }
            _ = storage.update { count in
                count += 1
                return count
            }
            #expect(relay.cutCount == 1, "the update's answer was cut")
            #expect(seen.bytes == bytes("11"), "the update's write was carried out")
            #expect(try other.read(key: "count") == bytes("100"), "the update was made again on the value made anew")
            let unknown = errors(namespace).filter { $0.message.contains("is not known") }
            #expect(unknown.count == 1, "the update reports its outcome unknown: \(errors(namespace))")
            #expect(eventuallyHolds(storage, 100))
        }
    }

    /// An update whose write was never carried out (its request lost), while another program changed the key and
    /// removed another key of the same bucket: the key, made before the write was sent, was not removed since, so the
    /// update finds its write not stored, and is made once, on the other program's value.
    @Test func anUpdateWhoseRequestWasLostIsMadeOnceAfterARemovalOfAnotherKeyOfItsBucket() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let neighbour = try #require(
                (0..<10_000).lazy.map { "other\($0)" }.first { removalsBucket(of: $0) == removalsBucket(of: "count") })
            try other.write(key: "count", data: bytes("10"))
            try other.write(key: neighbour, data: bytes("1"))
            let storage = WLStorage(key: "count", defaultValue: 0, flushInterval: nil, store: store)
            #expect(eventuallyHolds(storage, 10))
            relay.cutNextWrite(.request) {
                try? other.write(key: "count", data: bytes("50"))
                try? other.remove(key: neighbour)
            }
            storage.update { $0 += 1 }
            #expect(relay.cutCount == 1, "the update's request was cut")
            #expect(try other.read(key: "count") == bytes("51"), "the update was not made once on the other's value")
            let unknown = errors(namespace).filter { $0.message.contains("is not known") }
            #expect(unknown.isEmpty, "the update reported its outcome unknown: \(unknown)")
            #expect(eventuallyHolds(storage, 51))
        }
    }
}

/// What a step of the relay read, for the test to check after it.
private final class SeenBytes: @unchecked Sendable {  // `stored` under `lock`
    private let lock = NSLock()
    private var stored: Data?
    var bytes: Data? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
