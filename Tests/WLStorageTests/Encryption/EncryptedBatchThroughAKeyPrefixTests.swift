import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

/// The objects of an encrypted store with a key prefix, under it or over it, in the flush of every storage: they go in
/// the batch on condition under their prefixed keys, sealed for them; one another program changed meanwhile, unheard
/// of, keeps that program's field, and one another key sealed meanwhile, unheard of, is left as it is, the change
/// pending.
@Suite(.onTestThreads) struct EncryptedBatchThroughAKeyPrefixTests {
    struct Pair: Codable, Sendable, Equatable {
        var a = 0
        var b = 0
    }

    @Test(arguments: [false, true])
    func objectsGoInTheBatchUnderTheirPrefixedKeys(prefixUnderEncryption: Bool) throws {
        let memory = MemoryStore()
        let (key, wrongKey) = (try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random())
        func layered(_ base: MemoryStore, _ key: WLStorageEncryptionKey) -> any WLStorageStore {
            prefixUnderEncryption ? base.prefixed("p.").encrypted(with: key) : base.encrypted(with: key).prefixed("p.")
        }
        let store = layered(memory, key)
        let names = (0..<5).map { "k\($0)" }
        for name in names { try store.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let storages = names.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: store) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }
        // Unheard of: another program's change of k1's other field, and k3 sealed with another key.
        let other = MemoryStore()
        try layered(other, key).write(key: "k1", data: Data(#"{"a":0,"b":7}"#.utf8))
        try layered(other, wrongKey).write(key: "k3", data: Data(#"{"a":0,"b":9}"#.utf8))
        let sealedWithTheWrongKey = try #require(try other.read(key: "p.k3"))
        memory.writeUnreported("p.k1", data: try #require(try other.read(key: "p.k1")))
        memory.writeUnreported("p.k3", data: sealedWithTheWrongKey)

        flushAllStores([store])
        #expect(memory.conditionalBatches.first == ["p.k0", "p.k2", "p.k4"], "\(memory.conditionalBatches)")
        for (index, name) in names.enumerated() where name != "k3" {
            #expect(!storages[index].hasPendingChanges, "\(name): \(storages[index].lastError?.message ?? "")")
            let stored = try JSONDecoder().decode(Pair.self, from: try #require(try store.read(key: name)))
            #expect(stored == Pair(a: index + 1, b: name == "k1" ? 7 : 0), "\(name)")
        }
        #expect(try memory.read(key: "p.k3") == sealedWithTheWrongKey, "the value of another key was replaced")
        #expect(storages[3].hasPendingChanges)
        #expect(storages[3].lastError?.code == .decodingFailed, "\(storages[3].lastError?.message ?? "")")
    }
}
