import Foundation
import Testing
@testable import WLStorage

/// A store's bytes that do not decode are kept aside; when another program stores a value in an earlier shape while
/// they are, that value is read instead, migrated, and written back in the current shape, on condition that the key
/// still holds what was read: the bytes of that value, not the bytes kept aside.
@Suite(.capturingOutput) struct MigratedValueReadAfterAKeepAsideTests {
    @Test func aValueStoredWhileBadBytesWereKeptAsideIsRewrittenInTheCurrentShape() throws {
        let store = InterceptedStore()
        store.base.writeFromOutside("profile", json: "not json")
        let older = #"{"login":"ada"}"#
        store.afterNextCreate { key in
            // Another program stores a value of the earlier shape just as the bad bytes are copied aside.
            guard key.contains("~corrupt-") else { return }
            store.base.contents.state.withLock { $0.values["profile"] = Data(older.utf8) }
        }
        let storage = WLStorage(
            key: "profile", defaultValue: RewrittenProfile(name: "new", visits: 0), flushInterval: nil, store: store,
            migrations: rewriteMigrations)
        #expect(storage.wrappedValue == RewrittenProfile(name: "ada", visits: 1))
        storage.flush()
        let stored = try #require(store.base.stored("profile"))
        #expect(
            (try? JSONDecoder().decode(RewrittenProfile.self, from: Data(stored.utf8)))
                == RewrittenProfile(name: "ada", visits: 1),
            "the migrated value was not written back in the current shape: \(stored)")
        #expect(!storage.hasPendingChanges)
        #expect(storage.lastError == nil)
    }
}

extension MigratedValueReadAfterAKeepAsideTests {
    /// The same with encryption: the value stored meanwhile is sealed with a previous key, and is sealed again with
    /// the current one, on condition that the key still holds it.
    @Test func aValueSealedWithAPreviousKeyStoredWhileBadBytesWereKeptAsideIsSealedAgain() throws {
        let (current, previous) = (try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random())
        let base = InterceptedStore()
        try base.encrypted(with: current).write(key: "n", data: Data("not json".utf8))
        base.afterNextCreate { key in
            // Another program, still on the previous key, stores its value as the bad bytes are copied aside.
            guard key.contains("~corrupt-") else { return }
            try? InterceptedStore(base.base).encrypted(with: previous).write(key: "n", data: Data("7".utf8))
        }
        let storage = WLStorage(
            key: "n", defaultValue: 0, flushInterval: nil,
            store: base.encrypted(with: current, previousKeys: [previous]))
        #expect(storage.wrappedValue == 7)
        storage.flush()
        let opened = try? base.encrypted(with: current).read(key: "n")
        #expect(opened == Data("7".utf8), "the value is not sealed with the current key")
        #expect(!storage.hasPendingChanges)
    }
}
