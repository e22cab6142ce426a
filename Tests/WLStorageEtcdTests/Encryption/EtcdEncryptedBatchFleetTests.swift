import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Programs with the right and the wrong key, sharing encrypted keys of etcd, that end with a flush of every storage at
/// the same time, over more keys than a transaction reads: neither replaces a value it cannot open, and what each
/// reports written is its own value.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdEncryptedBatchFleetTests {
    struct Entry: Codable, Sendable, Equatable {
        var a = 0
        var b = 0
    }

    @Test func programsWithTheRightAndTheWrongKeyFlushingAtOnceReplaceNothingTheyCannotOpen() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let (key, wrongKey) = (try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random())
            let right = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace).encrypted(with: key)
            let wrong = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
                .encrypted(with: wrongKey)
            let names = (0..<300).map { String(format: "k%03d", $0) }
            for name in names.indices.filter({ $0 % 2 == 0 }).map({ names[$0] }) {
                try right.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8))
            }
            let rights = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: right) }
            let wrongs = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: wrong) }
            #expect(rights.allSatisfy { $0.wrappedValue == Entry() })
            #expect(wrongs.allSatisfy { $0.wrappedValue == Entry() })
            for index in names.indices {
                rights[index].wrappedValue.a = index + 1
                wrongs[index].wrappedValue.b = index + 1
            }
            let flushing = [startThread { flushAllStores([right]) }, startThread { flushAllStores([wrong]) }]
            for thread in flushing { thread.wait() }

            for (index, name) in names.enumerated() {
                if let opened = try? right.read(key: name) {
                    let stored = try JSONDecoder().decode(Entry.self, from: opened)
                    #expect(stored == Entry(a: index + 1), "\(name): \(stored)")
                    #expect(!rights[index].hasPendingChanges, "\(name): \(rights[index].lastError?.message ?? "")")
                    #expect(wrongs[index].hasPendingChanges, "\(name): the wrong key's change was reported written")
                } else {
                    #expect(index % 2 == 1, "\(name): the value of the right key was replaced by the wrong key's")
                    let stored = try JSONDecoder().decode(Entry.self, from: try #require(try wrong.read(key: name)))
                    #expect(stored == Entry(b: index + 1), "\(name): \(stored)")
                    #expect(rights[index].hasPendingChanges, "\(name): the right key's change was reported written")
                    #expect(!wrongs[index].hasPendingChanges, "\(name): \(wrongs[index].lastError?.message ?? "")")
                }
            }
        }
    }
}
