import Foundation
import Testing

@testable import WLStorage

// What one version of a program does with what another version stored: a fleet in a rolling deploy, or after a
// rollback, runs an older and a newer type on one key. Reading never writes, fields a type does not know survive its
// writes, and JSON a type cannot read is left as it is.

/// The type of the older version.
private struct SettingsV1: Codable, Equatable, Sendable {
    var darkMode = false
    var fontSize = 13
}

/// The type of the newer version: `darkMode` became `theme`.
private struct SettingsV2: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 13
}

private let fromV1: [WLStorageMigration<SettingsV2>] = [
    .from(SettingsV1.self) { SettingsV2(theme: $0.darkMode ? "dark" : "light", fontSize: $0.fontSize) }
]

private enum Mode: String, Codable, Sendable {
    case compact, comfortable
}

private struct Layout: Codable, Equatable, Sendable {
    var mode = Mode.compact
    var fontSize = 13
}

private struct Window: Codable, Equatable, Sendable {
    var width = 800
}

private struct StoredProfile: Codable, Equatable, Sendable {
    var name: String? = nil
    var counts: [String: Int] = [:]
    var window = Window()
}

private struct MigrationFailed: Error, CustomStringConvertible {
    var description: String { "cannot convert" }
}

/// Whether a cell of a file in `directory` is alive in this process.
private func hasLiveCell(in directory: URL) -> Bool {
    let path = directory.standardizedFileURL.path
    return Runtime.shared.registry.liveCells().contains { $0.directory?.path == path }
}

@Suite(.capturingOutput)
struct MixedVersionTests: StoredFileSuite {
    /// The JSON object in the file, parsed, to compare without depending on the order of members.
    private func object(_ name: String, in directory: URL) -> NSDictionary? {
        guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else {
            return nil
        }
        return (try? JSONSerialization.jsonObject(with: data)) as? NSDictionary
    }

    private func object(_ json: String) -> NSDictionary? {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? NSDictionary
    }

    // MARK: Reading never writes

    @Test func anOlderVersionThatStartsReadsTheFieldsItKnowsOfANewerValueAndWritesNothing() throws {
        try withTemporaryDirectory { directory in
            let newer = #"{"fontSize":18,"theme":"solarized"}"#
            try write(newer, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: SettingsV1(), flushInterval: 0, store: .directory(directory))
            // The field it knows is read; the one it lacks comes from its default.
            #expect(storage.wrappedValue == SettingsV1(darkMode: false, fontSize: 18))
            #expect(storage.lastError == nil)
            #expect(!storage.hasPendingChanges)
            storage.flush()
            #expect(contents("settings", in: directory) == newer)
            #expect(entries(of: directory) == ["settings"])
        }
    }

    @Test func anOlderVersionThatStartsReadsANewerEncryptedValueAndWritesNothing() throws {
        try withTemporaryDirectory { directory in
            let key = try WLStorageEncryptionKey.random()
            let store = WLStorageDirectoryStore.directory(directory).encrypted(with: key)
            do {
                let newer = WLStorage(key: "settings", defaultValue: SettingsV2(), flushInterval: nil, store: store)
                newer.wrappedValue = SettingsV2(theme: "solarized", fontSize: 18)
                newer.flush()
            }
            let sealed = contents("settings", in: directory)
            do {
                let older = WLStorage(key: "settings", defaultValue: SettingsV1(), flushInterval: 0, store: store)
                #expect(older.wrappedValue == SettingsV1(darkMode: false, fontSize: 18))
                #expect(older.lastError == nil)
                older.flush()
            }
            #expect(contents("settings", in: directory) == sealed)
            let again = WLStorage(key: "settings", defaultValue: SettingsV2(), flushInterval: nil, store: store)
            #expect(again.wrappedValue == SettingsV2(theme: "solarized", fontSize: 18))
        }
    }

    @Test func aValueThatLacksFieldsIsFilledInFromTheDefaultButNotWrittenBack() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"fontSize":18}"#, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: SettingsV2(theme: "dark"), flushInterval: 0, store: .directory(directory)
            )
            #expect(storage.wrappedValue == SettingsV2(theme: "dark", fontSize: 18))
            #expect(!storage.hasPendingChanges)
            #expect(storage.lastError == nil)
            storage.flush()
            #expect(contents("settings", in: directory) == #"{"fontSize":18}"#)
            #expect(entries(of: directory) == ["settings"])
        }
    }

    // MARK: JSON this version cannot read

    @Test func aValueWithAnEnumCaseThisVersionLacksIsNeitherMovedAsideNorReplaced() throws {
        try withTemporaryDirectory { directory in
            let newer = #"{"fontSize":18,"mode":"spacious"}"#
            try write(newer, key: "layout", in: directory)
            let storage = WLStorage(
                key: "layout", defaultValue: Layout(), flushInterval: 0, store: .directory(directory))
            #expect(storage.wrappedValue == Layout())
            let error = try #require(storage.lastError)
            #expect(error.code == .storedByAnotherVersion)
            #expect(error.message.contains("another version"))
            storage.flush()
            #expect(contents("layout", in: directory) == newer)
            #expect(entries(of: directory) == ["layout"])
            // A set of this version's user is written over it.
            storage.wrappedValue = Layout(mode: .comfortable, fontSize: 20)
            storage.flush()
            #expect(stored(Layout.self, key: "layout", in: directory) == Layout(mode: .comfortable, fontSize: 20))
        }
    }

    @Test func aMigrationThatThrowsLeavesTheValueAsItIsAndSaysSo() throws {
        try withTemporaryDirectory { directory in
            let older = #"{"darkMode":true,"fontSize":18}"#
            try write(older, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: SettingsV2(), flushInterval: 0, store: .directory(directory),
                migrations: [.from(SettingsV1.self) { _ in throw MigrationFailed() }])
            #expect(storage.wrappedValue == SettingsV2())
            let error = try #require(storage.lastError)
            #expect(error.code == .storedByAnotherVersion)
            #expect(error.message.contains("cannot convert"))
            storage.flush()
            #expect(contents("settings", in: directory) == older)
            #expect(entries(of: directory) == ["settings"])
        }
    }

    @Test func aValueInAStoreWithAnEnumCaseThisVersionLacksIsLeftAsItIs() throws {
        let store = MemoryStore()
        let newer = #"{"fontSize":18,"mode":"spacious"}"#
        store.writeFromOutside("layout", json: newer)
        let storage = WLStorage(key: "layout", defaultValue: Layout(), flushInterval: 0, store: store)
        #expect(storage.wrappedValue == Layout())
        #expect(storage.lastError?.code == .storedByAnotherVersion)
        storage.flush()
        #expect(store.stored("layout") == newer)
        #expect(try store.keys() == ["layout"])
    }

    // MARK: Fields a type does not know survive its writes

    @Test func anOlderVersionsSetKeepsTheFieldsOfANewerOne() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"darkMode":true,"fontSize":18,"theme":"solarized"}"#, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: SettingsV1(), flushInterval: 0, store: .directory(directory))
            #expect(storage.wrappedValue == SettingsV1(darkMode: true, fontSize: 18))
            #expect(storage.lastError == nil)
            storage.wrappedValue.fontSize = 20
            storage.flush()
            #expect(
                object("settings", in: directory) == object(#"{"darkMode":true,"fontSize":20,"theme":"solarized"}"#))
        }
    }

    @Test func fieldsOfNestedObjectsThatATypeDoesNotKnowSurviveItsWrites() throws {
        try withTemporaryDirectory { directory in
            try write(
                #"{"counts":{"a":1},"window":{"depth":3,"width":640},"zoom":{"level":2}}"#, key: "profile",
                in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: StoredProfile(), flushInterval: 0, store: .directory(directory))
            storage.wrappedValue.window.width = 1024
            storage.flush()
            #expect(
                object("profile", in: directory)
                    == object(#"{"counts":{"a":1},"window":{"depth":3,"width":1024},"zoom":{"level":2}}"#))
        }
    }

    @Test func anOptionalSetToNilAndARemovedEntryAreRemovedNotKept() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"counts":{"a":1,"b":2},"name":"ada","window":{"width":1}}"#, key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: StoredProfile(), flushInterval: 0, store: .directory(directory))
            #expect(storage.wrappedValue.name == "ada")
            storage.update { profile in
                profile.name = nil
                profile.counts["b"] = nil
            }
            storage.flush()
            #expect(object("profile", in: directory) == object(#"{"counts":{"a":1},"window":{"width":1}}"#))
        }
    }

    @Test func aMigratedValueKeepsTheOlderFieldsSoTheOlderVersionStillReadsIt() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"darkMode":true,"fontSize":18}"#, key: "settings", in: directory)
            do {
                let newer = WLStorage(
                    key: "settings", defaultValue: SettingsV2(), flushInterval: 0, store: .directory(directory),
                    migrations: fromV1)
                #expect(newer.wrappedValue == SettingsV2(theme: "dark", fontSize: 18))
                newer.flush()
            }
            #expect(object("settings", in: directory) == object(#"{"darkMode":true,"fontSize":18,"theme":"dark"}"#))
            // A rollback: the older version reads what it wrote, and the newer one's field stays. (The newer storage's
            // cell may live a moment longer, while a check of its own write ends.)
            #expect(eventually { !hasLiveCell(in: directory) })
            let older = WLStorage(
                key: "settings", defaultValue: SettingsV1(), flushInterval: 0, store: .directory(directory))
            #expect(older.wrappedValue == SettingsV1(darkMode: true, fontSize: 18))
            #expect(older.lastError == nil)
        }
    }

    @Test func removeUnknownFieldsWritesTheValueAsItsTypeEncodesIt() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"darkMode":true,"fontSize":18,"retired":1,"theme":"dark"}"#, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: SettingsV2(), flushInterval: nil, store: .directory(directory))
            storage.wrappedValue.fontSize = 20
            storage.flush()
            #expect(contents("settings", in: directory)?.contains("retired") == true)
            storage.removeUnknownFields()
            #expect(!storage.hasPendingChanges)
            #expect(contents("settings", in: directory) == #"{"fontSize":20,"theme":"dark"}"#)
            // Later writes have nothing more to keep.
            storage.wrappedValue.fontSize = 21
            storage.flush()
            #expect(contents("settings", in: directory) == #"{"fontSize":21,"theme":"dark"}"#)
        }
        let store = MemoryStore()
        store.writeFromOutside("settings", json: #"{"fontSize":18,"retired":1,"theme":"dark"}"#)
        let storage = WLStorage(key: "settings", defaultValue: SettingsV2(), flushInterval: nil, store: store)
        storage.removeUnknownFields()
        #expect(store.stored("settings") == #"{"fontSize":18,"theme":"dark"}"#)
    }

    @Test func aRunningOlderVersionReadsTheFieldsItKnowsWhenANewerOneStoresItsOwnShape() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"darkMode":true,"fontSize":18}"#, key: "settings", in: directory)
            let older = WLStorage(
                key: "settings", defaultValue: SettingsV1(), flushInterval: 0, store: .directory(directory))
            #expect(older.wrappedValue == SettingsV1(darkMode: true, fontSize: 18))
            // The newer version stores its own shape, without the field the older one needs.
            try replaceFromOutside(
                directory.appendingPathComponent("settings"), with: #"{"fontSize":18,"theme":"dark"}"#)
            try replaceFromOutside(
                directory.appendingPathComponent("settings"), with: #"{"fontSize":19,"theme":"dark"}"#)
            older.cell.checkForExternalChange()
            // The field it knows is followed; the one the newer shape lacks comes from the default (a rename declared
            // with `.renamed(from:to:)` would have kept it under its old name).
            #expect(eventually { older.wrappedValue == SettingsV1(darkMode: false, fontSize: 19) })
            #expect(older.lastError == nil)
            #expect(!older.hasPendingChanges)
            // Its next change keeps the newer version's field.
            older.wrappedValue.fontSize = 20
            older.flush()
            #expect(object("settings", in: directory) == object(#"{"darkMode":false,"fontSize":20,"theme":"dark"}"#))
        }
    }

    @Test func anUpdateThroughAConditionalStoreKeepsTheFieldsOfANewerVersion() throws {
        let store = MemoryStore()
        store.writeFromOutside("settings", json: #"{"darkMode":false,"fontSize":18,"theme":"solarized"}"#)
        let storage = WLStorage(key: "settings", defaultValue: SettingsV1(), flushInterval: 0, store: store)
        storage.update { $0.fontSize += 1 }
        storage.flush()
        let stored = try #require(store.stored("settings"))
        #expect(object(stored) == object(#"{"darkMode":false,"fontSize":19,"theme":"solarized"}"#))
    }

    @Test func anUpdateThatCannotReadAnotherVersionsValueKeepsTheFieldsOfWhatItRead() throws {
        let store = MemoryStore()
        store.writeFromOutside("layout", json: #"{"fontSize":18,"mode":"compact","zoom":1}"#)
        let storage = WLStorage(key: "layout", defaultValue: Layout(), flushInterval: nil, store: store)
        #expect(storage.wrappedValue == Layout(mode: .compact, fontSize: 18))
        // A newer version stores a value this one cannot read; its feed has not reached this program yet.
        store.contents.state.withLock {
            $0.values["layout"] = Data(#"{"fontSize":18,"mode":"spacious","zoom":2}"#.utf8)
        }
        // The update reads it, cannot decode it, and is made in this process as a set.
        storage.update { $0.fontSize = 20 }
        #expect(storage.lastError?.code == .storedByAnotherVersion)
        storage.flush()
        let stored = try #require(store.stored("layout"))
        // The members this version does not know are those of the value the update replaced: zoom 2, not the zoom 1
        // of an older value of the newer version.
        #expect(object(stored) == object(#"{"fontSize":20,"mode":"compact","zoom":2}"#))
    }

    @Test func aPendingRewriteGivesWayToAValueAnotherVersionStoredMeanwhile() throws {
        let store = MemoryStore()
        store.writeFromOutside("settings", json: #"{"darkMode":true,"fontSize":18}"#)
        let storage = WLStorage(
            key: "settings", defaultValue: SettingsV2(), flushInterval: nil, store: store, migrations: fromV1)
        #expect(storage.wrappedValue == SettingsV2(theme: "dark", fontSize: 18))
        #expect(storage.hasPendingChanges)  // the rewrite in the current shape
        // Another version stores a value this one cannot read; its news arrives before the rewrite is written.
        let theirs = #"{"fontSize":18,"theme":{"name":"dark","contrast":2}}"#
        store.writeFromOutside("settings", json: theirs)
        #expect(eventually { storage.lastError?.code == .storedByAnotherVersion })
        #expect(!storage.hasPendingChanges)
        storage.flush()
        #expect(store.stored("settings") == theirs)
        #expect(storage.lastError?.code == .storedByAnotherVersion)

        // In a directory, which has no conditional write, the rewrite would replace it.
        try withTemporaryDirectory { directory in
            try write(#"{"darkMode":true,"fontSize":18}"#, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: SettingsV2(), flushInterval: nil, store: .directory(directory),
                migrations: fromV1)
            #expect(storage.hasPendingChanges)
            try replaceFromOutside(directory.appendingPathComponent("settings"), with: theirs)
            #expect(eventually { storage.lastError?.code == .storedByAnotherVersion })
            #expect(!storage.hasPendingChanges)
            storage.flush()
            #expect(contents("settings", in: directory) == theirs)
        }
    }

    // MARK: Defaults

    @Test func aCustomBackerThatHoldsAValueNeverCallsTheDefaultClosure() {
        let backer = RecordingBacker<Int>(key: "count", stored: 7)
        let called = Switch(false)
        let storage = WLStorage(
            defaultValueClosure: {
                called.tally()
                return 0
            }, flushInterval: nil, backer: backer)
        #expect(storage.wrappedValue == 7)
        #expect(called.tallied == 0)
    }

    @Test func aSetWithNoIntervalIsWrittenByAFlushOnlyEvenBeforeTheDefaultIsSaved() throws {
        try withTemporaryDirectory { directory in
            let scheduler = ManualScheduler()
            let storage = manualStorage("count", in: directory, default: 0, scheduler: scheduler)
            storage.wrappedValue = 5
            // The tick that saves the default runs now: it saves the default, not the change.
            scheduler.advance(by: .seconds(3_600))
            #expect(contents("count", in: directory) != "5")
            #expect(storage.hasPendingChanges)
            storage.flush()
            #expect(contents("count", in: directory) == "5")
        }
    }

    // MARK: Keys

    @Test func aStartWithTheWrongKeySavesNothingSoTheRightKeyCanStore() throws {
        try withTemporaryDirectory { directory in
            let right = try WLStorageEncryptionKey.random()
            let wrong = try WLStorageEncryptionKey.random()
            do {
                let storage = WLStorage(
                    key: "token", defaultValue: "", flushInterval: 0,
                    store: WLStorageDirectoryStore.directory(directory).encrypted(with: wrong))
                storage.flush()
                #expect(storage.wrappedValue == "")
            }
            #expect(entries(of: directory) == [])
            let store = WLStorageDirectoryStore.directory(directory).encrypted(with: right)
            do {
                let storage = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store)
                storage.wrappedValue = "secret"
                storage.flush()
                #expect(!storage.hasPendingChanges)
            }
            let again = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store)
            #expect(again.wrappedValue == "secret")
        }
    }

    @Test func aStartWithoutTheKeyLeavesASealedValueAsItIsAndWritesNothingOverIt() throws {
        try withTemporaryDirectory { directory in
            let key = try WLStorageEncryptionKey.random()
            let store = WLStorageDirectoryStore.directory(directory).encrypted(with: key)
            do {
                let storage = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store)
                storage.wrappedValue = "secret"
                storage.flush()
            }
            let sealed = contents("token", in: directory)
            do {
                let plain = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: .directory(directory))
                #expect(plain.wrappedValue == "")
                let error = try #require(plain.lastError)
                #expect(error.message.contains("sealed"))
                #expect(error.message.contains(key.fingerprintText))
                plain.wrappedValue = "plain text"
                plain.flush()
                #expect(plain.hasPendingChanges)
                #expect(contents("token", in: directory) == sealed)
                #expect(entries(of: directory) == ["token"])
                #expect(
                    WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store).wrappedValue == "secret")
                // Once the sealed value is removed, the change is written.
                try FileManager.default.removeItem(at: directory.appendingPathComponent("token"))
                plain.flush()
                #expect(contents("token", in: directory) == #""plain text""#)
            }
        }
    }

    @Test func aRunningStorageWithoutTheKeyWritesNothingOverASealedValueStoredMeanwhile() throws {
        try withTemporaryDirectory { directory in
            let key = try WLStorageEncryptionKey.random()
            let plain = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: .directory(directory))
            plain.flush()
            // Another program, with the key, stores a secret.
            let sealedValue = WLStorageDirectoryStore.directory(directory).encrypted(with: key)
            try sealedValue.write(key: "token", data: Data(#""secret""#.utf8))
            let sealed = contents("token", in: directory)
            plain.cell.checkForExternalChange()
            #expect(eventually { plain.lastError?.message.contains("sealed") == true })
            plain.wrappedValue = "plain text"
            plain.flush()
            #expect(plain.hasPendingChanges)
            #expect(contents("token", in: directory) == sealed)
            try FileManager.default.removeItem(at: directory.appendingPathComponent("token"))
            plain.flush()
            #expect(contents("token", in: directory) == #""plain text""#)
        }
    }

    @Test func aPlainDefaultSavedByAStartWithoutTheKeyDoesNotBlockTheKey() throws {
        try withTemporaryDirectory { directory in
            let key = try WLStorageEncryptionKey.random()
            do {
                // A start without the key: a plain storage of the same directory saves its default.
                let plain = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: .directory(directory))
                plain.flush()
            }
            #expect(contents("token", in: directory) == #""""#)
            let store = WLStorageDirectoryStore.directory(directory).encrypted(with: key)
            do {
                let storage = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store)
                #expect(storage.lastError?.code == .decodingFailed)
                #expect(storage.lastError?.path == directory.appendingPathComponent("token").path)
                storage.wrappedValue = "secret"
                storage.flush()
                #expect(!storage.hasPendingChanges)
            }
            // The plain bytes are kept aside, as they are, under another key.
            #expect(entries(of: directory).count == 2)
            #expect(entries(of: directory).contains { $0 != "token" && contents($0, in: directory) == #""""# })
            let again = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store)
            #expect(again.wrappedValue == "secret")
        }
    }
}
