import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Updates over the etcd store are made exactly once when the answer to their write is lost: the write is a
/// transaction on the key's `mod_revision` that records its tag beside the key, and a write sent again is judged by
/// that tag, never by the bytes. Against the shared single-member server; answers are cut by a relay in front of it.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdExactlyOnceUpdateTests {
    /// `stored`, `refused` or `not stored: <error>`.
    private func describe(_ result: WLStorageTaggedWriteResult) -> String {
        switch result {
        case .stored: "stored"
        case .refused: "refused"
        case .notStored(let error): "not stored: \(error)"
        }
    }

    /// The errors reported for the store of `namespace`.
    private func errors(_ namespace: String) -> [WLStorageError] {
        ReportedErrors.errors { $0.message.contains(namespace) || ($0.path ?? "").contains(namespace) }
    }

    /// The write never reached etcd, and another program stored the very bytes it held (the counter's 1) meanwhile.
    /// Judged by its bytes, the write would look stored and the increment would be lost; judged by its tag, it was
    /// not, and the update runs again on the new value.
    @Test func anUpdateWhoseWriteNeverArrivedRunsAgainWhenAnotherProgramStoredTheSameBytes() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            // Something stored: the storage makes no creation of its default, which would be the write cut.
            try other.write(key: "count", data: bytes("0"))
            let storage = WLStorage(key: "count", defaultValue: 0, flushInterval: nil, store: store)
            relay.cutNextWrite(.request) { try? other.write(key: "count", data: bytes("1")) }
            let stored = storage.update { count in
                count += 1
                return count
            }
            #expect(relay.cutCount == 1, "the update's write was cut")
            #expect(stored == 2)
            #expect(try other.read(key: "count") == bytes("2"), "both increments count")
            #expect(errors(namespace).isEmpty, "\(errors(namespace))")
        }
    }

    /// The write was carried out and its answer lost, and another program wrote the key after it. Read back, the key
    /// holds other bytes, which says nothing of the write; its tag says it was stored, and it is not made again.
    @Test func anUpdateWhoseAnswerWasLostAfterItWasStoredCountsOnce() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let relay = try TransactionCuttingRelay(to: server.clientPort)
            defer { relay.stop() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [relay.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            try other.write(key: "count", data: bytes("10"))
            let storage = WLStorage(key: "count", defaultValue: 0, flushInterval: nil, store: store)
            relay.cutNextWrite(.answer) {
                // Another program's increment, on what the cut write stored.
                if let data = try? other.read(key: "count"), let value = Int(String(decoding: data, as: UTF8.self)) {
                    try? other.write(key: "count", data: bytes(String(value + 1)))
                }
            }
            let stored = storage.update { count in
                count += 1
                return count
            }
            #expect(relay.cutCount == 1, "the update's answer was cut")
            #expect(stored == 11)
            #expect(try other.read(key: "count") == bytes("12"), "each increment counts once")
            #expect(errors(namespace).isEmpty, "a write found by its tag is no unknown outcome: \(errors(namespace))")
            #expect(eventuallyHolds(storage, 12))
        }
    }

    /// A key keeps the tags of its last `keptTags` tagged writes, beside it: not among the namespace's keys, not
    /// reported by its feed, kept by another program's plain write, and removed with the key.
    @Test func theTagsOfAKeysLastWritesAreKeptBesideIt() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let feed = try FeedRecorder(store)
            defer { feed.cancel() }
            let tags = (0..<(WLStorageEtcdStore.keptTags + 2)).map { WLStorageWriteTag(text: "tag-\($0)") }
            var version: Int64?
            for tag in tags {
                let result = try store.write(key: "k", data: bytes(tag.text), ifVersion: version, tag: tag)
                try #require(describe(result) == "stored", "the tagged write \(tag)")
                guard case .found(_, let found) = try store.readVersioned(key: "k") else {
                    Issue.record("nothing stored after \(tag)")
                    return
                }
                version = found
            }
            let last = try #require(try store.trace(of: tags[tags.count - 1], key: "k"))
            #expect(last.tagFound && last.tagsKept == WLStorageEtcdStore.keptTags && last.version == version)
            #expect(try store.trace(of: tags[2], key: "k")?.tagFound == true, "the 128th last tag is kept")
            #expect(try store.trace(of: tags[1], key: "k")?.tagFound == false, "the one before it is not")
            // A resend of the last write, refused: the key's version moved on.
            let resent = try store.write(key: "k", data: bytes("again"), ifVersion: version! - 1, tag: tags[0])
            #expect(describe(resent) == "refused", "a write on a version the key no longer has")
            #expect(try store.keys() == ["k"], "the tags are no key of the namespace")

            try other.write(key: "k", data: bytes("plain"))
            let afterPut = try #require(try store.trace(of: tags[tags.count - 1], key: "k"))
            #expect(afterPut.tagFound && afterPut.version > version!, "a plain write keeps the tags, and moves on")
            try other.write(key: "marker", data: bytes("1"))
            #expect(eventually(timeout: 60) { feed.reported.contains(.key("marker")) })
            let named = Set(
                feed.reported.compactMap { change -> String? in
                    if case .key(let key) = change { return key }
                    return nil
                })
            #expect(named == ["k", "marker"], "the feed names the keys alone, never their tags: \(named)")

            try store.remove(key: "k")
            #expect(try store.trace(of: tags[tags.count - 1], key: "k") == nil)
            // Made anew, the key keeps none of the tags it had.
            let made = try store.write(
                key: "k", data: bytes("new"), ifVersion: nil, tag: WLStorageWriteTag(text: "new"))
            #expect(describe(made) == "stored")
            let anew = try #require(try store.trace(of: tags[tags.count - 1], key: "k"))
            #expect(!anew.tagFound && anew.tagsKept == 1, "the tags went with the key")
        }
    }
}
