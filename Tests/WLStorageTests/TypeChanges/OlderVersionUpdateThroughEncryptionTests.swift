// An older version's update of a value a newer version stored, through an encrypted store over a store in memory that
// writes on condition: the newer version's fields survive, also when the newer version writes while the update is made.
import Foundation
import Testing

@testable import WLStorage

/// The older version's type; the newer one has a `theme` too.
private struct Counter: Codable, Equatable, Sendable {
    var count = 0
}

/// How the encrypted store is laid over the store in memory.
enum EncryptedLayering: String, CaseIterable, Sendable {
    case direct
    case overAPrefix
    case nested

    /// The store a program uses, over `base`, with `key`.
    func store(over base: InterceptedStore, key: WLStorageEncryptionKey) -> any WLStorageStore {
        switch self {
        case .direct: base.encrypted(with: key)
        case .overAPrefix: base.prefixed("app.").encrypted(with: key)
        case .nested: base.encrypted(with: key).encrypted(with: key)
        }
    }
}

@Suite(.capturingOutput) struct OlderVersionUpdateThroughEncryptionTests {
    /// The JSON object stored under `key`, opened, parsed.
    private func object(_ store: any WLStorageStore, _ key: String) throws -> NSDictionary? {
        guard let data = try store.read(key: key) else { return nil }
        return try JSONSerialization.jsonObject(with: data) as? NSDictionary
    }

    @Test(arguments: EncryptedLayering.allCases)
    func anOlderVersionsUpdateKeepsTheNewerVersionsFields(_ layering: EncryptedLayering) throws {
        let key = try WLStorageEncryptionKey.random()
        let base = InterceptedStore()
        let newer = layering.store(over: base, key: key)
        try newer.write(key: "counter", data: Data(#"{"count":1,"theme":"dark"}"#.utf8))
        // The older program has a handle of its own on the same values.
        let older = layering.store(over: InterceptedStore(base.base), key: key)
        let storage = WLStorage(key: "counter", defaultValue: Counter(), flushInterval: nil, store: older)
        #expect(storage.wrappedValue == Counter(count: 1))
        storage.update { $0.count += 1 }
        storage.flush()
        #expect(try object(newer, "counter") == ["count": 2, "theme": "dark"] as NSDictionary)
        #expect(storage.lastError == nil)
    }

    /// The newer version stores its value after the update read the key and before it writes: the update's write on
    /// condition fails, it reads again, and is made over the newer value, whose fields it keeps.
    @Test(arguments: EncryptedLayering.allCases)
    func anOlderVersionsUpdateRacingANewerVersionsWriteKeepsBoth(_ layering: EncryptedLayering) throws {
        let key = try WLStorageEncryptionKey.random()
        let base = InterceptedStore()
        let newer = layering.store(over: base, key: key)
        try newer.write(key: "counter", data: Data(#"{"count":1,"theme":"dark"}"#.utf8))
        let handle = InterceptedStore(base.base)
        let older = layering.store(over: handle, key: key)
        let storage = WLStorage(key: "counter", defaultValue: Counter(), flushInterval: nil, store: older)
        #expect(storage.wrappedValue == Counter(count: 1))
        handle.beforeNextConditionalWrite {
            try? newer.write(key: "counter", data: Data(#"{"count":10,"theme":"light"}"#.utf8))
        }
        storage.update { $0.count += 1 }
        storage.flush()
        #expect(try object(newer, "counter") == ["count": 11, "theme": "light"] as NSDictionary)
        #expect(storage.wrappedValue == Counter(count: 11))
    }
}
