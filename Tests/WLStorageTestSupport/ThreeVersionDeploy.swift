import Foundation
import Testing
import WLStorage

// A fleet that goes through three versions of a type and rolls one back, on one key of any store: V1 stores
// `{theme, fontSize}`, V2 adds `lineSpacing` with no migration, V3 renames `theme` to `colorScheme` (declared) and
// drops `lineSpacing`. Each version reads what the others stored, as far as it can map it, and a change made through
// any of them is seen by the others, under either name. The scenarios run in each test target, over its stores.

private struct DeployV1: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 13
}

private struct DeployV2: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 13
    var lineSpacing = 1.0
}

private struct DeployV3: Codable, Equatable, Sendable {
    var colorScheme = "light"
    var fontSize = 13
}

/// V3's migrations as the documentation gives them: the rename, then the earlier types, newest first.
private let v3Migrations: [WLStorageMigration<DeployV3>] = [
    .renamed(from: "theme", to: "colorScheme"),
    .from(DeployV2.self) { DeployV3(colorScheme: $0.theme, fontSize: $0.fontSize) },
    .from(DeployV1.self) { DeployV3(colorScheme: $0.theme, fontSize: $0.fontSize) },
]

/// V3 as it was documented before renames: migrations alone, which write the value back in V3's shape.
private let v3MigrationsOnly = Array(v3Migrations.dropFirst())

private func v2(_ store: any WLStorageStore) -> WLStorage<DeployV2> {
    opened { WLStorage(key: "settings", defaultValue: DeployV2(), flushInterval: nil, store: store) }
}

private func v3(_ store: any WLStorageStore, _ migrations: [WLStorageMigration<DeployV3>] = v3Migrations)
    -> WLStorage<DeployV3>
{
    opened {
        WLStorage(key: "settings", defaultValue: DeployV3(), flushInterval: nil, store: store, migrations: migrations)
    }
}

/// A storage of the key as another version, once the storage of the version before it is gone.
///
/// One process stands for every version here, and a process opens a key as one type at a time: the cell of a storage
/// just let go of may outlive it for a moment (a store's feed or a write still holds it), and a storage of another
/// type opened meanwhile is refused (`typeMismatch`). Real versions run in processes of their own.
private func opened<V>(_ open: () -> WLStorage<V>) -> WLStorage<V> {
    var storage = open()
    _ = eventually(timeout: 30) {
        guard storage.lastError?.code == .typeMismatch else { return true }
        storage = open()
        return storage.lastError?.code != .typeMismatch
    }
    #expect(storage.lastError?.code != .typeMismatch, "the storage of the version before still holds the key")
    return storage
}

/// The stored object's members, as JSON values.
private func storedObject(in store: any WLStorageStore) -> [String: Any]? {
    guard let data = try? store.read(key: "settings") else { return nil }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
}

/// What the store holds for the key, as text.
private func storedText(in store: any WLStorageStore) -> String? {
    (try? store.read(key: "settings")).flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
}

/// Stores `json` as another program of the fleet would.
private func storeFromAnotherProgram(_ json: String, in store: any WLStorageStore) throws {
    try store.write(key: "settings", data: Data(json.utf8))
}

/// The scenarios, each over a store of the caller's, which holds nothing under the key `settings` yet.
public enum ThreeVersionDeploy {
    /// V1 stores, V2 runs, V3 updates, V3 is rolled back to V2, which updates, and V3 comes back: nothing is lost.
    public static func aVersionRolledBackToReadsTheStoredValueAndItsUpdateKeepsEveryField(
        in store: any WLStorageStore, renameDeclared: Bool
    ) throws {
        try storeFromAnotherProgram(#"{"fontSize":15,"theme":"dark"}"#, in: store)
        do {
            // V2 runs without changing it: reading never writes.
            let second = v2(store)
            #expect(second.wrappedValue == DeployV2(theme: "dark", fontSize: 15, lineSpacing: 1))
            second.flush()
        }
        #expect(storedText(in: store) == #"{"fontSize":15,"theme":"dark"}"#)
        do {
            let third = v3(store, renameDeclared ? v3Migrations : v3MigrationsOnly)
            #expect(third.wrappedValue == DeployV3(colorScheme: "dark", fontSize: 15))
            #expect(third.lastError == nil)
            third.update { $0.fontSize += 1 }
            third.flush()
        }
        let written = try #require(storedObject(in: store))
        #expect(written["colorScheme"] as? String == "dark")
        #expect(written["theme"] as? String == "dark", "V3's write dropped the name V1 and V2 read: \(written)")
        #expect(written["fontSize"] as? Int == 16)
        do {
            // Rolled back to V2: it lacks `lineSpacing` and does not know `colorScheme`, and still reads the value.
            let second = v2(store)
            #expect(second.wrappedValue == DeployV2(theme: "dark", fontSize: 16, lineSpacing: 1))
            #expect(second.lastError == nil, "\(second.lastError?.message ?? "")")
            second.update { $0.fontSize += 1 }
            second.flush()
            #expect(second.lastError == nil)
        }
        let third = v3(store, renameDeclared ? v3Migrations : v3MigrationsOnly)
        #expect(third.wrappedValue == DeployV3(colorScheme: "dark", fontSize: 17))
        let first = try #require(storedObject(in: store))
        #expect(first["colorScheme"] as? String == "dark", "the rolled-back update dropped a field: \(first)")
    }

    /// A V2 running while V3 deploys follows V3's changes. `outside` is another program's handle of the same keys: a
    /// store does not report its own writes as changes.
    public static func aRunningOlderVersionFollowsTheNewerOnesChanges(
        in store: any WLStorageStore, outside: any WLStorageStore
    ) throws {
        try storeFromAnotherProgram(#"{"fontSize":15,"theme":"dark"}"#, in: store)
        let running = v2(store)
        #expect(running.wrappedValue.fontSize == 15)
        // V3, deployed beside it, sets the font size: it writes both names.
        try storeFromAnotherProgram(#"{"colorScheme":"dark","fontSize":20,"theme":"dark"}"#, in: outside)
        let followed = eventually { running.wrappedValue.fontSize == 20 }
        #expect(followed, "the running V2 holds \(running.wrappedValue)")
        #expect(running.wrappedValue.theme == "dark")
        #expect(running.lastError == nil)
        #expect(!running.hasPendingChanges, "V2 read a value and would write it: reading never writes")
    }

    /// A V2 started during the deploy reads V3's shape, not its default.
    public static func aVersionStartedDuringTheDeployReadsTheNewerShapeNotItsDefault(in store: any WLStorageStore)
        throws
    {
        try storeFromAnotherProgram(#"{"colorScheme":"dark","fontSize":20,"theme":"dark"}"#, in: store)
        let second = v2(store)
        #expect(second.wrappedValue == DeployV2(theme: "dark", fontSize: 20, lineSpacing: 1))
        #expect(second.lastError == nil)
        #expect(!second.hasPendingChanges)
    }

    /// A change made through the old name or the new one is seen by the other version.
    public static func aChangeThroughEitherNameIsSeenByTheOtherVersion(in store: any WLStorageStore) throws {
        try storeFromAnotherProgram(#"{"fontSize":15,"theme":"dark"}"#, in: store)
        do {
            let third = v3(store)
            third.update { $0.fontSize = 16 }
            third.flush()
        }
        do {
            // V2, still running somewhere, changes the theme: it knows only the old name.
            let second = v2(store)
            second.update { $0.theme = "blue" }
            second.flush()
            #expect(second.lastError == nil, "\(second.lastError?.message ?? "")")
        }
        do {
            let third = v3(store)
            #expect(third.lastError == nil, "\(third.lastError?.message ?? "")")
            #expect(
                third.wrappedValue == DeployV3(colorScheme: "blue", fontSize: 16),
                "the rename split the value: \(storedText(in: store) ?? "nothing")")
            third.update { $0.colorScheme = "green" }
            third.flush()
        }
        let second = v2(store)
        #expect(second.wrappedValue.theme == "green")
    }

    /// A value with a field V2 knows but cannot read is another version's, left as it is.
    public static func aValueAVersionCannotMapIsStillAnotherVersionsAndLeftAsItIs(in store: any WLStorageStore) throws {
        // A field V2 knows holds JSON of another type: V2 cannot map it.
        let other = #"{"colorScheme":"dark","fontSize":"large","theme":"dark"}"#
        try storeFromAnotherProgram(other, in: store)
        let second = v2(store)
        #expect(second.wrappedValue == DeployV2())
        #expect(second.lastError?.code == .storedByAnotherVersion)
        second.flush()
        #expect(storedText(in: store) == other)
    }
}
