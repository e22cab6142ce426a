import Foundation
import Testing

@testable import WLStorage

private struct RewrittenProfile: Codable, Equatable {
    var name: String
    var visits: Int
}

/// The earlier shape, read through a migration and rewritten in the current one.
private struct RewrittenProfileV0: Codable {
    var login: String
}

private let rewriteMigrations: [WLStorageMigration<RewrittenProfile>] = [
    .from(RewrittenProfileV0.self) { RewrittenProfile(name: $0.login, visits: 1) }
]

/// A value read through a migration is written back in the current shape; that rewrite is not a change of the
/// program's user, and never replaces what another program stored after the read, even when the news of that change
/// has not reached the storage yet.
@Suite struct MigratedValueRewriteTests {
    /// The other program's change reaches the file through a hard link in another directory, so the watch of the
    /// storage's directory hears nothing of it: only the rewrite itself can notice that the file is no longer the one it
    /// read.
    @Test func aRewriteOfAFileChangedUnheardSinceItWasReadGivesWay() throws {
        try withTemporaryDirectory { directory in
            try Data(#"{"login":"ada"}"#.utf8).write(to: directory.appendingPathComponent("profile"))
            let elsewhere = directory.appendingPathComponent("elsewhere", isDirectory: true)
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: false)
            let link = elsewhere.appendingPathComponent("profile")
            #expect(Glibc.link(directory.appendingPathComponent("profile").path, link.path) == 0)

            let storage = WLStorage(
                key: "profile", defaultValue: RewrittenProfile(name: "new", visits: 0), flushInterval: nil,
                store: .directory(directory), migrations: rewriteMigrations)
            #expect(storage.wrappedValue == RewrittenProfile(name: "ada", visits: 1))
            #expect(storage.hasPendingChanges)  // the rewrite

            // Another program stores its value in place, through the other link.
            let theirs = #"{"name":"bob","visits":42}"#
            let handle = try FileHandle(forWritingTo: link)
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data(theirs.utf8))
            try handle.close()

            storage.flush()
            #expect(
                stored(RewrittenProfile.self, key: "profile", in: directory)
                    == RewrittenProfile(name: "bob", visits: 42))
            #expect(storage.wrappedValue == RewrittenProfile(name: "bob", visits: 42))
            #expect(!storage.hasPendingChanges)
        }
    }
}

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
