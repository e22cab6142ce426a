import Foundation
import Testing
import WLStorageJSON
import WLStorageTestSupport

@testable import WLStorage

// A declared rename (`WLStorageMigration.renamed(from:to:)`) over the edges of what a type encodes: a renamed field
// that the type leaves out, renames declared one after another, and names the encoder escapes.

private struct Appearance: Codable, Equatable, Sendable {
    var colorScheme: String? = "light"
    var fontSize = 13
}

private let themeRenamed: [WLStorageMigration<Appearance>] = [.renamed(from: "theme", to: "colorScheme")]

/// The third name of a field: `first` became `second`, which became `third`.
private struct ThirdName: Codable, Equatable, Sendable {
    var third = "none"
    var count = 0
}

private let chain: [WLStorageMigration<ThirdName>] = [
    .renamed(from: "first", to: "second"), .renamed(from: "second", to: "third"),
]

/// `Appearance` with a field more, the rename still declared: a version after the rename that gained a field.
private struct WrappingAppearance: Codable, Equatable, Sendable {
    var colorScheme: String? = "light"
    var fontSize = 13
    var wraps = false
}

/// `Appearance` encoded with `null` for a `nil` color scheme, as a custom encoder may.
private struct NullEncodedAppearance: Codable, Equatable, Sendable {
    var colorScheme: String? = "light"
    var fontSize = 13

    init(colorScheme: String? = "light", fontSize: Int = 13) {
        self.colorScheme = colorScheme
        self.fontSize = fontSize
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(colorScheme, forKey: .colorScheme)
        try container.encode(fontSize, forKey: .fontSize)
    }
}

/// The version before the rename, whose `theme` is no optional.
private struct ThemedAppearance: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 13
}

/// How a test changes the value: a set, or an update (on condition, through a conditional store).
enum RenameChange: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case set, update

    var testDescription: String { rawValue }

    func apply<T>(to storage: WLStorage<T>, _ change: @escaping @Sendable (inout T) -> Void) {
        switch self {
        case .set:
            var value = storage.wrappedValue
            change(&value)
            storage.wrappedValue = value
        case .update:
            storage.update(change)
        }
    }
}

@Suite(.capturingOutput)
struct FieldRenameTests {
    private func object(_ text: String?) -> NSDictionary? {
        text.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? NSDictionary }
    }

    @Test func aNameTheStoredObjectHoldsTwiceIsReadAsTheDecoderReadsIt() throws {
        func read(_ stored: String) throws -> Appearance {
            let renamed = FieldRename.reading(Data(stored.utf8), [FieldRename(old: "theme", new: "colorScheme")])
            return try JSONCoders.decoder.decode(Appearance.self, from: renamed)
        }
        // The decoder reads the first of a repeated name: the old one's value goes there, and is taken from there.
        #expect(try read(#"{"colorScheme":"a","colorScheme":"b","fontSize":1,"theme":"dark"}"#).colorScheme == "dark")
        #expect(try read(#"{"fontSize":1,"theme":"dark","theme":"light"}"#).colorScheme == "dark")
    }

    @Test(arguments: RenameChange.allCases)
    func aRenamedFieldSetToNilIsNotBroughtBackByItsOldName(change: RenameChange) throws {
        let store = MemoryStore()
        store.writeFromOutside("appearance", json: #"{"fontSize":15,"theme":"dark"}"#)
        do {
            let storage = WLStorage(
                key: "appearance", defaultValue: Appearance(), flushInterval: nil, store: store,
                migrations: themeRenamed)
            #expect(storage.wrappedValue == Appearance(colorScheme: "dark", fontSize: 15))
            change.apply(to: storage) { $0.colorScheme = nil }
            storage.flush()
            #expect(storage.lastError == nil)
        }
        // The synthesized encoder leaves a `nil` out: the old name goes with it, or it would be read as the value.
        #expect(object(store.stored("appearance")) == object(#"{"fontSize":15}"#))
        let reopened = WLStorage(
            key: "appearance", defaultValue: Appearance(), flushInterval: nil, store: store, migrations: themeRenamed)
        #expect(reopened.wrappedValue == Appearance(colorScheme: nil, fontSize: 15))
    }

    @Test(arguments: RenameChange.allCases)
    func renamesDeclaredOneAfterAnotherWriteEveryEarlierName(change: RenameChange) throws {
        let store = MemoryStore()
        // Stored by the version that knew the first name only.
        store.writeFromOutside("chain", json: #"{"count":1,"first":"one"}"#)
        do {
            let storage = WLStorage(
                key: "chain", defaultValue: ThirdName(), flushInterval: nil, store: store, migrations: chain)
            #expect(storage.wrappedValue == ThirdName(third: "one", count: 1))
            change.apply(to: storage) { $0.third = "two" }
            storage.flush()
        }
        // Every version still running reads the change, whichever name it knows.
        #expect(store.stored("chain") == #"{"count":1,"first":"two","second":"two","third":"two"}"#)
        let reopened = WLStorage(
            key: "chain", defaultValue: ThirdName(), flushInterval: nil, store: store, migrations: chain)
        #expect(reopened.wrappedValue == ThirdName(third: "two", count: 1))
    }

    @Test(arguments: ["Zeta", "a/b", "quote\"d", "é", "z", "_x", "colorScheme"])
    func aWriteWithARenameIsTheEncodersSortedOutput(oldName: String) throws {
        let store = MemoryStore()
        let storage = WLStorage(
            key: "sorted", defaultValue: Appearance(), flushInterval: nil, store: store,
            migrations: [.renamed(from: oldName, to: "colorScheme")])
        storage.wrappedValue = Appearance(colorScheme: "dark", fontSize: 14)
        storage.flush()
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Both names hold the value, placed where the encoder's sorted keys put them.
        var members = ["fontSize": "14", "colorScheme": "dark"]
        members[oldName] = "dark"
        let plain = String(decoding: try encoder.encode(members), as: UTF8.self)
        #expect(store.stored("sorted") == plain.replacingOccurrences(of: #""14""#, with: "14"))
    }

    @Test func aTypeThatGainedAFieldReadsAValueWithTheOldNameAsItIsWithoutAMigrationOrAWrite() throws {
        try withTemporaryDirectory { directory in
            // Written by the version that declared the rename first: both names alike.
            let stored = #"{"colorScheme":"dark","fontSize":15,"theme":"dark"}"#
            try Data(stored.utf8).write(to: directory.appendingPathComponent("appearance"))
            let storage = WLStorage(
                key: "appearance", defaultValue: WrappingAppearance(), flushInterval: nil, store: .directory(directory),
                migrations: [
                    .renamed(from: "theme", to: "colorScheme"),
                    .from(Appearance.self) { WrappingAppearance(colorScheme: $0.colorScheme, fontSize: $0.fontSize) },
                ])
            #expect(storage.wrappedValue == WrappingAppearance(colorScheme: "dark", fontSize: 15, wraps: false))
            // The old name is a field the type knows through the rename: the type gained a field, no more.
            #expect(!storage.hasPendingChanges, "reading never writes")
            storage.flush()
            #expect(entries(of: directory) == ["appearance"])
            let text = FileManager.default.contents(atPath: directory.appendingPathComponent("appearance").path)
            #expect(text.map { String(decoding: $0, as: UTF8.self) } == stored)
        }
    }

    @Test func aRunningVersionWithTheRenameFollowsAChangeMadeThroughTheOldName() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("appearance")
            try Data(#"{"colorScheme":"dark","fontSize":15,"theme":"dark"}"#.utf8).write(to: file)
            let storage = WLStorage(
                key: "appearance", defaultValue: Appearance(), flushInterval: nil, store: .directory(directory),
                migrations: themeRenamed)
            #expect(storage.wrappedValue == Appearance(colorScheme: "dark", fontSize: 15))
            // An earlier version, which knows `theme` only, changes it and keeps `colorScheme` as it found it.
            let outside = #"{"colorScheme":"dark","fontSize":15,"theme":"blue"}"#
            try replaceFromOutside(file, with: outside)
            storage.cell.checkForExternalChange()
            #expect(eventually { storage.wrappedValue.colorScheme == "blue" })
            #expect(storage.lastError == nil)
            #expect(!storage.hasPendingChanges, "reading never writes")
            storage.flush()
            #expect(String(decoding: try Data(contentsOf: file), as: UTF8.self) == outside)
        }
    }

    @Test func removingUnknownFieldsKeepsTheOldNameWhileTheRenameIsDeclared() throws {
        let store = MemoryStore()
        store.writeFromOutside("appearance", json: #"{"fontSize":15,"retired":true,"theme":"dark"}"#)
        let storage = WLStorage(
            key: "appearance", defaultValue: Appearance(), flushInterval: nil, store: store, migrations: themeRenamed)
        storage.removeUnknownFields()
        storage.flush()
        #expect(store.stored("appearance") == #"{"colorScheme":"dark","fontSize":15,"theme":"dark"}"#)
    }

    @Test func aSecondStorageThatDeclaresTheRenameMakesTheFirstOnesWritesHoldBothNames() throws {
        let store = MemoryStore()
        store.writeFromOutside("appearance", json: #"{"colorScheme":"dark","fontSize":15,"theme":"dark"}"#)
        let first = WLStorage(key: "appearance", defaultValue: Appearance(), flushInterval: nil, store: store)
        let second = WLStorage(
            key: "appearance", defaultValue: Appearance(), flushInterval: nil, store: store, migrations: themeRenamed)
        first.wrappedValue.colorScheme = "blue"
        first.flush()
        #expect(second.wrappedValue.colorScheme == "blue")
        #expect(store.stored("appearance") == #"{"colorScheme":"blue","fontSize":15,"theme":"blue"}"#)
    }

    @Test(arguments: RenameChange.allCases)
    func aRenameThatJoinsAfterTheValueWasReadDoesNotWriteTheDefaultOverTheOldName(change: RenameChange) throws {
        struct Scheme: Codable, Equatable, Sendable {
            var colorScheme = "light"
            var fontSize = 13
        }
        let store = MemoryStore()
        store.writeFromOutside("appearance", json: #"{"fontSize":15,"theme":"dark"}"#)
        // The first storage knows no rename: it maps the earlier version's value, `colorScheme` from its default.
        let first = WLStorage(key: "appearance", defaultValue: Scheme(), flushInterval: nil, store: store)
        #expect(first.wrappedValue == Scheme(colorScheme: "light", fontSize: 15))
        let second = WLStorage(
            key: "appearance", defaultValue: Scheme(), flushInterval: nil, store: store,
            migrations: [.renamed(from: "theme", to: "colorScheme")])
        // The rename it brings has the key read again.
        #expect(first.wrappedValue == Scheme(colorScheme: "dark", fontSize: 15))
        change.apply(to: second) { $0.fontSize += 1 }
        second.flush()
        // The earlier version's `theme` was never read: it is not replaced by the default's.
        let stored = try #require(object(store.stored("appearance")))
        #expect(stored["theme"] as? String == "dark", "\(stored)")
    }

    @Test func aRenameThatJoinsKeepsAChangeOfThisProcessNotYetWritten() throws {
        struct Scheme: Codable, Equatable, Sendable {
            var colorScheme = "light"
            var fontSize = 13
        }
        let store = MemoryStore()
        store.writeFromOutside("appearance", json: #"{"fontSize":15,"theme":"dark"}"#)
        let first = WLStorage(key: "appearance", defaultValue: Scheme(), flushInterval: nil, store: store)
        first.wrappedValue.colorScheme = "blue"
        let second = WLStorage(
            key: "appearance", defaultValue: Scheme(), flushInterval: nil, store: store,
            migrations: [.renamed(from: "theme", to: "colorScheme")])
        #expect(second.wrappedValue == Scheme(colorScheme: "blue", fontSize: 15))
        second.flush()
        #expect(store.stored("appearance") == #"{"colorScheme":"blue","fontSize":15,"theme":"blue"}"#)
    }

    @Test func aRenamedFieldEncodedAsNullLeavesTheOldNameOutForTheEarlierVersion() throws {
        let store = MemoryStore()
        store.writeFromOutside("appearance", json: #"{"fontSize":15,"theme":"dark"}"#)
        do {
            let storage = WLStorage(
                key: "appearance", defaultValue: NullEncodedAppearance(), flushInterval: nil, store: store,
                migrations: [.renamed(from: "theme", to: "colorScheme")])
            storage.wrappedValue.colorScheme = nil
            storage.flush()
        }
        #expect(store.stored("appearance") == #"{"colorScheme":null,"fontSize":15}"#)
        // The earlier version, which needs a theme, reads the value as far as it maps it rather than not at all.
        let earlier = WLStorage(key: "appearance", defaultValue: ThemedAppearance(), flushInterval: nil, store: store)
        #expect(earlier.wrappedValue == ThemedAppearance(theme: "light", fontSize: 15))
        #expect(earlier.lastError == nil)
    }
}
