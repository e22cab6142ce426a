import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// The batch on condition of an encrypted store's objects in a flush of every storage, through a proxy in front of etcd,
/// while between its read of the keys and its write another program with the right key (still sealing with the key
/// being rotated away) changes a field of some objects and one with another key replaces others: over a slow link, with
/// the connections cut, held past the store's timeout (what was held is delivered late), or cut once the transaction
/// was carried out (its answer lost). What it reports written holds this program's change and the other's field; what
/// it leaves pending is reported; no value of the other key is replaced, and every other key's value opens.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdEncryptedBatchOverATroubledLinkTests {
    struct Entry: Codable, Sendable, Equatable {
        var text = ""
        var note = ""
    }

    enum Trouble: String, CaseIterable, Sendable {
        case slowLink, cutAfterTheRead, heldPastTheTimeout, answerLost
    }

    /// The etcd store, whose read of many keys runs `afterRead` once, after it read them.
    final class InterruptedStore: WLStorageVersionedStore {
        let base: WLStorageEtcdStore
        let afterRead: Lock<(@Sendable () -> Void)?>
        var identity: String { base.identity }

        init(_ base: WLStorageEtcdStore, afterRead: @escaping @Sendable () -> Void) {
            self.base = base
            self.afterRead = Lock(afterRead)
        }

        func read(key: String) throws -> Data? { try base.read(key: key) }
        func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
        func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
        func write(_ batch: [WLStorageStoreWrite]) throws { try base.write(batch) }
        func remove(key: String) throws { try base.remove(key: key) }
        func remove(key: String, ifItHolds data: Data) throws -> Bool { try base.remove(key: key, ifItHolds: data) }
        func keys() throws -> [String] { try base.keys() }
        func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
            base.observeChanges(changed)
        }
        func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
            try base.write(key: key, data: data, ifItHolds: expected)
        }
        func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
            try base.write(batch, ifTheyHold: expected)
        }
        var settlesLostAnswers: Bool { base.settlesLostAnswers }
        func readVersioned(key: String) throws -> WLStorageVersionedRead { try base.readVersioned(key: key) }
        func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
            -> WLStorageTaggedWriteResult
        {
            try base.write(key: key, data: data, ifVersion: version, tag: tag)
        }
        func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
            try base.trace(of: tag, key: key)
        }
        func read(keys: [String]) throws -> [Data?] {
            let values = try base.read(keys: keys)
            afterRead.withLock { body in
                defer { body = nil }
                return body
            }?()
            return values
        }
    }

    @Test(arguments: Trouble.allCases)
    func aBatchMeetingAnotherProgramsChangesAndATroubledLinkReplacesNothingNewerAndReportsWhatItLeaves(
        trouble: Trouble
    ) async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let proxy = try TCPProxy(to: server.clientPort)
            defer { proxy.stop() }
            let namespace = uniqueNamespace()
            let (old, key, wrongKey) = (
                try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random(),
                try WLStorageEncryptionKey.random()
            )
            let etcd = try WLStorageEtcdStore(
                endpoints: [proxy.endpoint], namespace: namespace,
                timeout: .seconds(trouble == .heldPastTheTimeout ? 2 : 10))
            let direct = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            let other = direct.encrypted(with: old)
            let wrong = direct.encrypted(with: wrongKey)
            let reader = direct.encrypted(with: key, previousKeys: [old])
            let names = (0..<30).map { String(format: "k%02d", $0) }
            let changed = names.indices.filter { $0 % 5 == 0 }
            let foreign = names.indices.filter { $0 % 7 == 3 }
            let foreignValue = Data(#"{"note":"w","text":"w"}"#.utf8)
            try other.write(names.map { WLStorageStoreWrite(key: $0, data: Data(#"{"note":"","text":""}"#.utf8)) })
            let cutter = Lock<DispatchGroup?>(nil)
            let committed = Lock(false)
            let store = InterruptedStore(etcd) {
                try? other.write(
                    changed.map {
                        WLStorageStoreWrite(key: names[$0], data: Data(#"{"note":"n\#($0)","text":""}"#.utf8))
                    })
                try? wrong.write(foreign.map { WLStorageStoreWrite(key: names[$0], data: foreignValue) })
                switch trouble {
                case .slowLink: break
                case .cutAfterTheRead: proxy.cutAll()
                case .heldPastTheTimeout: proxy.set(.holding)
                case .answerLost:
                    // The transaction reaches etcd 1.5 s from now, its answer 1.5 s later: cut once it was carried out.
                    let before = try? direct.read(key: names[1])
                    proxy.delay(.milliseconds(1500))
                    cutter.withLock {
                        $0 = startThread {
                            let seen = eventually(timeout: 60) { (try? direct.read(key: names[1])) != before }
                            committed.withLock { $0 = seen }
                            proxy.delay(.zero)
                            proxy.cutAll()
                        }
                    }
                }
            }
            let encrypted = store.encrypted(with: key, previousKeys: [old])
            let storages = names.map {
                WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: encrypted)
            }
            #expect(storages.allSatisfy { $0.wrappedValue == Entry() })
            for (index, storage) in storages.enumerated() { storage.wrappedValue.text = "t\(index)" }
            if trouble == .slowLink { proxy.delay(.milliseconds(10)) }

            flushAllStores([encrypted])
            cutter.withLock { $0 }?.wait()
            #expect(trouble != .answerLost || committed.withLock { $0 }, "the write was not carried out before the cut")
            #expect(store.afterRead.withLock { $0 } == nil, "the batch read no keys")
            func expected(_ index: Int) -> Entry {
                Entry(text: "t\(index)", note: changed.contains(index) ? "n\(index)" : "")
            }
            func check(_ index: Int) throws {
                let name = names[index]
                if foreign.contains(index) {
                    #expect(try wrong.read(key: name) == foreignValue, "\(name): the other key's value was replaced")
                    #expect(storages[index].hasPendingChanges, "\(name): reported written over the other key's value")
                    #expect(storages[index].lastError != nil, "\(name): a change left pending was not reported")
                    return
                }
                let stored = try JSONDecoder().decode(Entry.self, from: try #require(try reader.read(key: name)))
                if storages[index].hasPendingChanges {
                    #expect(storages[index].lastError != nil, "\(name): a change left pending was not reported")
                    #expect(stored == expected(index) || stored == Entry(note: expected(index).note), "\(name)")
                } else {
                    #expect(stored == expected(index), "\(name): \(stored.text) \(stored.note)")
                }
            }
            for index in names.indices { try check(index) }
            if trouble == .slowLink {
                for index in names.indices where !foreign.contains(index) {
                    #expect(
                        !storages[index].hasPendingChanges,
                        "\(names[index]): \(storages[index].lastError?.message ?? "")")
                }
            }
            proxy.delay(.zero)
            proxy.set(.forwarding)
            let own = names.indices.filter { !foreign.contains($0) }.map { storages[$0] }
            #expect(
                eventually(timeout: 120) {
                    if own.contains(where: \.hasPendingChanges) { flushAllStores([encrypted]) }
                    return own.allSatisfy { !$0.hasPendingChanges }
                }, "\(own.compactMap(\.lastError).prefix(2))")
            _ = eventually(timeout: 60) { proxy.chunksInFlight == 0 }
            for index in names.indices { try check(index) }
            // Once the other key's values are removed, the changes left pending on them are written.
            for index in foreign { try wrong.remove(key: names[index]) }
            #expect(
                eventually(timeout: 120) {
                    if storages.contains(where: \.hasPendingChanges) { flushAllStores([encrypted]) }
                    return storages.allSatisfy { !$0.hasPendingChanges }
                }, "\(storages.compactMap(\.lastError).prefix(2))")
            for index in names.indices {
                let stored = try JSONDecoder().decode(
                    Entry.self, from: try #require(try reader.read(key: names[index])))
                let whole = foreign.contains(index) ? Entry(text: "t\(index)") : expected(index)
                #expect(stored == whole, "\(names[index]): \(stored)")
            }
        }
    }
}
