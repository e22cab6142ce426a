import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Programs of a fleet that share encrypted rows and end with a flush of every storage at the same time, whose objects
/// go in a batch on condition of the sealed bytes read: one with the wrong key never replaces a value it cannot open
/// (nor does the right key replace the wrong one's), and two programs in the middle of a key rotation keep each
/// other's fields.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresEncryptedBatchFleetTests {
    struct Entry: Codable, Sendable, Equatable {
        var a = 0
        var b = 0
    }

    /// Another handle of the cluster's database: a store of its own identity, as another program's.
    private static func otherStore(_ cluster: PostgresCluster, _ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(
            url: "postgresql:///postgres?host=\(cluster.directory.path),\(cluster.directory.path)"
                + "&port=\(cluster.port),\(cluster.port)&user=postgres", namespace: namespace)
    }

    /// Half the keys hold a value of the right key; the other half nothing. A program with the right key and one with
    /// the wrong key set every object, and flush every storage at once: the values of the right key stay (the wrong
    /// one's change stays pending); each key that held nothing holds the value of the program that stored first, and
    /// the other's change stays pending, never reported written.
    @Test func programsWithTheRightAndTheWrongKeyFlushingAtOnceReplaceNothingTheyCannotOpen() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let (key, wrongKey) = (try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random())
        let right = try WLStoragePostgresStore(url: cluster.url, namespace: namespace).encrypted(with: key)
        let wrong = try Self.otherStore(cluster, namespace).encrypted(with: wrongKey)
        let names = (0..<40).map { String(format: "k%02d", $0) }
        for name in names.indices.filter({ $0 % 2 == 0 }).map({ names[$0] }) {
            try right.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8))
        }
        let rights = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: right) }
        let wrongs = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: wrong) }
        #expect(rights.allSatisfy { $0.wrappedValue == Entry() } && wrongs.allSatisfy { $0.wrappedValue == Entry() })
        for index in names.indices {
            rights[index].wrappedValue.a = index + 1
            wrongs[index].wrappedValue.b = index + 1
        }
        let flushing = [startThread { flushAllStores([right]) }, startThread { flushAllStores([wrong]) }]
        for thread in flushing { thread.wait() }

        let reader = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        for (index, name) in names.enumerated() {
            let sealed = try #require(try reader.read(key: name), "\(name) holds nothing")
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
            #expect(try reader.read(key: name) == sealed, "\(name) changed after the flushes")
        }
    }

    /// Values sealed with the old key; in the middle of a rotation, one program has the old key first and the new one
    /// as a previous key, another the other way round (its storages reseal what they read). Each changes its own field
    /// of every object, and both flush every storage at once: every object ends with both changes, sealed with a key
    /// both open, and both programs come to hold it.
    @Test func twoProgramsInTheMiddleOfAKeyRotationFlushingAtOnceKeepEachOthersFields() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let (old, new) = (try WLStorageEncryptionKey.random(), try WLStorageEncryptionKey.random())
        let first = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
            .encrypted(with: old, previousKeys: [new])
        let second = try Self.otherStore(cluster, namespace).encrypted(with: new, previousKeys: [old])
        let names = (0..<40).map { String(format: "k%02d", $0) }
        let sealer = try WLStoragePostgresStore(url: cluster.url, namespace: namespace).encrypted(with: old)
        for name in names { try sealer.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let firsts = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: first) }
        let seconds = names.map { WLStorage(key: $0, defaultValue: Entry(), flushInterval: nil, store: second) }
        #expect(firsts.allSatisfy { $0.wrappedValue == Entry() } && seconds.allSatisfy { $0.wrappedValue == Entry() })
        for index in names.indices {
            firsts[index].wrappedValue.a = index + 1
            seconds[index].wrappedValue.b = index + 1
        }
        let flushing = [startThread { flushAllStores([first]) }, startThread { flushAllStores([second]) }]
        for thread in flushing { thread.wait() }
        let all = firsts + seconds
        #expect(
            eventually(timeout: 60) {
                if all.contains(where: \.hasPendingChanges) { flushAllStores([first, second]) }
                return all.allSatisfy { !$0.hasPendingChanges }
            }, "\(all.compactMap(\.lastError).prefix(2))")
        for (index, name) in names.enumerated() {
            for store in [first, second] {
                let stored = try JSONDecoder().decode(Entry.self, from: try #require(try store.read(key: name)))
                #expect(stored == Entry(a: index + 1, b: index + 1), "\(name): \(stored)")
            }
        }
        let expected = names.indices.map { Entry(a: $0 + 1, b: $0 + 1) }
        #expect(eventually(timeout: 60) { firsts.map(\.wrappedValue) == expected })
        #expect(eventually(timeout: 60) { seconds.map(\.wrappedValue) == expected })
    }

    struct SettingsV1: Codable, Sendable, Equatable {
        var theme = "light"
        var fontSize = 13
    }

    struct SettingsV2: Codable, Sendable, Equatable {
        var theme = "light"
        var fontSize = 13
        var lineSpacing = 1.0
    }

    struct SettingsV3: Codable, Sendable, Equatable {
        var colorScheme = "light"
        var fontSize = 13
    }

    /// A storage of `settings` as another version, once the cell of the version before it has let the key go.
    private static func opened<V>(_ open: () -> WLStorage<V>) -> WLStorage<V> {
        var storage = open()
        _ = eventually(timeout: 30) {
            guard storage.lastError?.code == .typeMismatch else { return true }
            storage = open()
            return storage.lastError?.code != .typeMismatch
        }
        return storage
    }

    /// V1 stores an object; V2 (an added field) runs, V3 (a field renamed, declared) updates, V2 is rolled back to and
    /// updates, then V3 again, each version ending with a flush of every storage, over encrypted rows that another
    /// program, with the same key, changes in a field between the versions: no field of any version is lost.
    @Test func threeVersionsEndingWithAFlushOfEveryStorageKeepEveryField() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let key = try WLStorageEncryptionKey.random()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace).encrypted(with: key)
        let outside = try Self.otherStore(cluster, namespace).encrypted(with: key)
        func stored() throws -> [String: Any] {
            let data = try #require(try outside.read(key: "settings"))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        /// Another program's change of `member` in what is stored.
        func change(_ member: String, to value: Any) throws {
            var object = try stored()
            object[member] = value
            try outside.write(key: "settings", data: try JSONSerialization.data(withJSONObject: object))
        }
        let migrations: [WLStorageMigration<SettingsV3>] = [
            .renamed(from: "theme", to: "colorScheme"),
            .from(SettingsV2.self) { SettingsV3(colorScheme: $0.theme, fontSize: $0.fontSize) },
            .from(SettingsV1.self) { SettingsV3(colorScheme: $0.theme, fontSize: $0.fontSize) },
        ]
        func v2() -> WLStorage<SettingsV2> {
            Self.opened { WLStorage(key: "settings", defaultValue: SettingsV2(), flushInterval: nil, store: store) }
        }
        func v3() -> WLStorage<SettingsV3> {
            Self.opened {
                WLStorage(
                    key: "settings", defaultValue: SettingsV3(), flushInterval: nil, store: store,
                    migrations: migrations)
            }
        }
        try outside.write(key: "settings", data: Data(#"{"fontSize":15,"theme":"dark","extra":1}"#.utf8))
        do {
            let second = v2()
            #expect(second.wrappedValue == SettingsV2(theme: "dark", fontSize: 15))
            second.wrappedValue.lineSpacing = 1.5
            try change("extra", to: 2)  // heard of before the flush, or not
            flushAllStores([store])
            #expect(!second.hasPendingChanges, "\(second.lastError?.message ?? "")")
        }
        do {
            let third = v3()
            #expect(eventually { third.wrappedValue == SettingsV3(colorScheme: "dark", fontSize: 15) })
            third.update { $0.fontSize += 1 }
            flushAllStores([store])
            #expect(!third.hasPendingChanges, "\(third.lastError?.message ?? "")")
        }
        var object = try stored()
        #expect(object["colorScheme"] as? String == "dark" && object["theme"] as? String == "dark", "\(object)")
        #expect(object["fontSize"] as? Int == 16 && object["lineSpacing"] as? Double == 1.5, "\(object)")
        #expect(object["extra"] as? Int == 2, "\(object)")
        do {
            let second = v2()
            #expect(eventually { second.wrappedValue == SettingsV2(theme: "dark", fontSize: 16, lineSpacing: 1.5) })
            second.update { $0.fontSize += 1 }
            try change("extra", to: 3)
            flushAllStores([store])
            #expect(!second.hasPendingChanges, "\(second.lastError?.message ?? "")")
        }
        object = try stored()
        #expect(object["fontSize"] as? Int == 17 && object["extra"] as? Int == 3, "\(object)")
        #expect(object["colorScheme"] as? String == "dark", "\(object)")
        let third = v3()
        #expect(eventually { third.wrappedValue == SettingsV3(colorScheme: "dark", fontSize: 17) })
        third.update { $0.colorScheme = "blue" }
        try change("extra", to: 4)
        flushAllStores([store])
        #expect(!third.hasPendingChanges, "\(third.lastError?.message ?? "")")
        object = try stored()
        #expect(object["colorScheme"] as? String == "blue" && object["theme"] as? String == "blue", "\(object)")
        #expect(object["fontSize"] as? Int == 17 && object["lineSpacing"] as? Double == 1.5, "\(object)")
        #expect(object["extra"] as? Int == 4, "\(object)")
    }
}
