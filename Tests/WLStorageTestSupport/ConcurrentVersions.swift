import Foundation
import Synchronization
import Testing
import WLStorage

// Three versions of a type writing one key at the same time, each through a store of its own (as three programs'
// stores are to one process): V1 `{theme, fontSize}`, V2 adds `lineSpacing`, V3 renames `theme` to `colorScheme`
// (declared). V1 and V3 count one counter with `update` at once while a third program runs V2 and is rolled back to V1.

private struct ConcurrentV1: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 0
}

private struct ConcurrentV2: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 0
    var lineSpacing = 1.0
}

private struct ConcurrentV3: Codable, Equatable, Sendable {
    var colorScheme = "light"
    var fontSize = 0
}

/// Opens a storage with `open` until the storage of another type released before it has let go of the key.
private func reopened<V>(_ open: () -> WLStorage<V>) -> WLStorage<V> {
    var storage = open()
    _ = eventually(timeout: 60) {
        guard storage.lastError?.code == .typeMismatch else { return true }
        storage = open()
        return storage.lastError?.code != .typeMismatch
    }
    #expect(storage.lastError?.code != .typeMismatch, "the storage of the version before still holds the key")
    return storage
}

/// The scenarios, over stores of the caller's with identities of their own, which hold nothing under `settings` yet.
public enum ConcurrentVersions {
    /// V1 and V3 count at once, a third program runs V2, changes its own field and is rolled back to V1, which counts
    /// too; then V3 changes the renamed field and removes the unknown fields. Every update is counted once, V2's field
    /// survives every other version's update until V3 removes it, and the renamed field never splits.
    public static func updatesOfThreeVersionsAtOnceCountOnceAndKeepEveryField(
        stores: [any WLStorageStore], rounds: Int = 25
    ) throws {
        try #require(stores.count == 3)
        let key = "settings"
        let rename: [WLStorageMigration<ConcurrentV3>] = [.renamed(from: "theme", to: "colorScheme")]
        let first = WLStorage(key: key, defaultValue: ConcurrentV1(), flushInterval: 0, store: stores[0])
        let third = WLStorage(
            key: key, defaultValue: ConcurrentV3(), flushInterval: 0, store: stores[1], migrations: rename)
        let failures = Mutex<[String]>([])
        let counting = [
            startThread {
                for _ in 0..<rounds {
                    first.update { $0.fontSize += 1 }
                    if let error = first.lastError { failures.withLock { $0.append("V1: \(error.message)") } }
                }
            },
            startThread {
                for _ in 0..<rounds {
                    third.update { $0.fontSize += 1 }
                    if let error = third.lastError { failures.withLock { $0.append("V3: \(error.message)") } }
                }
            },
        ]
        // The third program runs V2, sets its own field with an update, and counts.
        do {
            let second = WLStorage(key: key, defaultValue: ConcurrentV2(), flushInterval: 0, store: stores[2])
            second.update { $0.lineSpacing = 2 }
            for _ in 0..<rounds { second.update { $0.fontSize += 1 } }
            second.flush()
            #expect(second.lastError == nil, "V2: \(second.lastError?.message ?? "")")
        }
        // Rolled back to V1: it counts too, and its updates keep the fields it does not know.
        let rolledBack = reopened {
            WLStorage(key: key, defaultValue: ConcurrentV1(), flushInterval: 0, store: stores[2])
        }
        for _ in 0..<rounds { rolledBack.update { $0.fontSize += 1 } }
        rolledBack.flush()
        #expect(rolledBack.lastError == nil, "V1 rolled back: \(rolledBack.lastError?.message ?? "")")
        for group in counting { group.wait() }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")

        let stored = { () throws -> [String: Any] in
            let data = try #require(try stores[0].read(key: key))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        var object = try stored()
        #expect(object["fontSize"] as? Int == 4 * rounds, "an update was lost or counted twice: \(object)")
        #expect(object["lineSpacing"] as? Double == 2, "V2's field was lost: \(object)")
        #expect(object["theme"] as? String == "light" && object["colorScheme"] as? String == "light", "\(object)")

        // V3 changes the renamed field; every version reads it under its name.
        third.update { $0.colorScheme = "green" }
        third.flush()
        object = try stored()
        #expect(object["theme"] as? String == "green" && object["colorScheme"] as? String == "green", "\(object)")
        #expect(eventually(timeout: 60) { first.wrappedValue.theme == "green" }, "V1 holds \(first.wrappedValue)")
        #expect(
            eventually(timeout: 60) { rolledBack.wrappedValue == ConcurrentV1(theme: "green", fontSize: 4 * rounds) })
        // V1 changes it through the old name, at once with V3 counting: the rename does not split.
        let counter = startThread {
            for _ in 0..<rounds { third.update { $0.fontSize += 1 } }
        }
        first.update { $0.theme = "blue" }
        counter.wait()
        #expect(
            eventually(timeout: 60) { third.wrappedValue == ConcurrentV3(colorScheme: "blue", fontSize: 5 * rounds) },
            "V3 holds \(third.wrappedValue), the key \(String(decoding: (try? stores[0].read(key: key)) ?? nil ?? Data(), as: UTF8.self))"
        )

        // V3 removes the fields it does not know: V2's goes, the old name of its renamed field stays.
        third.removeUnknownFields()
        third.flush()
        object = try stored()
        #expect(object["lineSpacing"] == nil, "\(object)")
        #expect(object["theme"] as? String == "blue" && object["colorScheme"] as? String == "blue", "\(object)")
        #expect(object["fontSize"] as? Int == 5 * rounds, "\(object)")
        for (name, error) in [
            ("V1", first.lastError), ("V3", third.lastError), ("V1 rolled back", rolledBack.lastError),
        ] {
            #expect(error == nil, "\(name): \(error?.message ?? "")")
        }
    }
}
