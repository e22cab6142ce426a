// A value stored in an earlier shape is filled in or migrated and rewritten without losing another program's change or
// what the user cleared.
import Dispatch
import Foundation
import Observation
import Testing

@testable import WLStorage

private struct PanedProfile: Codable, Equatable {
    var name: String
    var visits: Int
    var pane: ProfilePane
}

private let defaultPanedProfile = PanedProfile(name: "new", visits: 5, pane: ProfilePane())

private let panedProfileMigrations: [WLStorageMigration<PanedProfile>] = [
    .from(PanedProfileV0.self) { PanedProfile(name: $0.login, visits: 5, pane: ProfilePane()) }
]

private let defaultClearablePrefs = ClearablePrefs(
    shortcuts: ["copy": "c", "paste": "v"], homePage: "https://example.com", theme: "light")

private struct JoinedModeV1: Codable {
    var dark: Bool
}

private struct JoinedMode: Codable, Equatable {
    var theme: String
}

/// The earlier version stored `name` and `shape`; this one added `visits`.
private struct Drawing: Codable, Equatable {
    var name: String
    var shape: DrawnShape
    var visits: Int
}

private struct ProfilePane: Codable, Equatable {
    var width = 800
    var height = 600
}

/// The earlier version's shape, migrated and written back in the current one.
private struct PanedProfileV0: Codable {
    var login: String
}

/// Preferences of a new version, which added `theme`; the earlier one stored `shortcuts` and `homePage` only.
private struct ClearablePrefs: Codable, Equatable {
    var shortcuts: [String: String]
    var homePage: String?
    var theme: String
}

/// A shape that is either of two cases, as Swift synthesizes `Codable` for an enum with associated values: an object
/// with one key, the case's name.
private enum DrawnShape: Codable, Equatable {
    case circle(radius: Int)
    case square(side: Int)
}

@Suite(.capturingOutput)
struct TypeChangeRewriteTests: StoredFileSuite {
    /// A value read in an earlier shape is rewritten in the current one "as a change", and a pending local change
    /// wins over another program's: so another program's newer value, stored before the rewrite is written, is
    /// overwritten by the value this process merely read, and is lost (the kept bytes are the first ones, not it).
    @Test func anotherProgramsChangeBeforeTheRewriteIsNotOverwrittenByIt() async throws {
        try await withTemporaryDirectory { directory in
            try write(Data(#"{"login":"ada"}"#.utf8), key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: defaultPanedProfile, flushInterval: nil, store: .directory(directory),
                migrations: panedProfileMigrations)
            #expect(storage.wrappedValue.name == "ada")
            #expect(storage.hasPendingChanges)  // the rewrite
            // Another program (say, the new version running beside) stores a value of its own.
            let theirs = #"{"name":"bob","pane":{"height":2,"width":1},"visits":42}"#
            try replaceFromOutside(directory.appendingPathComponent("profile"), with: theirs)
            #expect(await waitUntil(timeout: 30) { storage.wrappedValue.name == "bob" })
            storage.flush()
            #expect(stored(PanedProfile.self, key: "profile", in: directory)?.name == "bob")
            #expect(stored(PanedProfile.self, key: "profile", in: directory)?.visits == 42)
        }
    }

    @Test func anotherProgramsChangeInAStoreBeforeTheRewriteIsNotOverwrittenByIt() {
        let store = MemoryStore()
        store.writeFromOutside("profile", json: #"{"login":"ada"}"#)
        let storage = WLStorage(
            key: "profile", defaultValue: defaultPanedProfile, flushInterval: nil, store: store,
            migrations: panedProfileMigrations
        )
        #expect(storage.wrappedValue.name == "ada")
        #expect(storage.hasPendingChanges)
        store.writeFromOutside("profile", json: #"{"name":"bob","pane":{"height":2,"width":1},"visits":42}"#)
        #expect(eventually(timeout: 30) { storage.wrappedValue.name == "bob" })
        storage.flush()
        #expect(store.stored("profile")?.contains("bob") == true)
    }

    /// `JSONDecoder` and `JSONSerialization` accept a UTF-8 byte order mark: a file in the current shape with one
    /// reads, and the same file lacking a field added to the type is filled in as it would be without the mark.
    @Test func aFileWithAByteOrderMarkIsFilledInAsTheSameFileWithoutOne() throws {
        try withTemporaryDirectory { directory in
            let mark = Data([0xEF, 0xBB, 0xBF])
            let current = #"{"name":"cy","visits":1,"pane":{"width":1,"height":2}}"#
            try write(mark + Data(current.utf8), key: "current", in: directory)
            let reference = WLStorage(
                key: "current", defaultValue: defaultPanedProfile, flushInterval: nil, store: .directory(directory))
            #expect(reference.wrappedValue.name == "cy")

            try write(mark + Data(#"{"name":"ada"}"#.utf8), key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: defaultPanedProfile, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.name == "ada")
            #expect(storage.lastError == nil)
            #expect(!entries(of: directory).contains { $0.hasPrefix("profile~corrupt-") })
        }
    }

    /// The fill cannot tell a field that is absent because it is new from an optional that is absent because it was
    /// `nil` (JSONEncoder leaves nil optionals out): when the type gains a field, a home page the user had cleared
    /// comes back as the default's.
    @Test func anOptionalTheUserClearedIsNotFilledInFromTheDefault() throws {
        try withTemporaryDirectory { directory in
            // Stored by the earlier version with homePage nil.
            try write(Data(#"{"shortcuts":{"copy":"k"}}"#.utf8), key: "prefs", in: directory)
            let storage = WLStorage(
                key: "prefs", defaultValue: defaultClearablePrefs, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.theme == "light")
            #expect(storage.wrappedValue.homePage == nil)
        }
    }

    /// A dictionary is a JSON object too: the fill adds to it the default's entries the user had removed.
    @Test func entriesTheUserRemovedFromADictionaryAreNotFilledInFromTheDefault() throws {
        try withTemporaryDirectory { directory in
            // Stored by the earlier version after the user removed the "paste" shortcut and changed "copy".
            try write(
                Data(#"{"shortcuts":{"copy":"k"},"homePage":"https://a.example"}"#.utf8), key: "prefs",
                in: directory)
            let storage = WLStorage(
                key: "prefs", defaultValue: defaultClearablePrefs, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.theme == "light")
            #expect(storage.wrappedValue.shortcuts == ["copy": "k"])
        }
    }

    /// A second storage of a file already open joins its cell, and its migrations are dropped without a word: an
    /// outside change in the earlier shape, which the storage was given the migration for, is reported undecodable
    /// and not adopted.
    @Test func theMigrationsOfAStorageThatJoinsAnOpenCellAreUsed() async throws {
        try await withTemporaryDirectory { directory in
            let first = WLStorage(key: "mode", defaultValue: JoinedMode(theme: "light"), store: .directory(directory))
            first.flush()
            let second = WLStorage(
                key: "mode", defaultValue: JoinedMode(theme: "light"), store: .directory(directory),
                migrations: [.from(JoinedModeV1.self) { JoinedMode(theme: $0.dark ? "dark" : "light") }])
            try replaceFromOutside(directory.appendingPathComponent("mode"), with: #"{"dark":true}"#)
            #expect(await waitUntil(timeout: 30) { second.wrappedValue.theme == "dark" })
            #expect(second.lastError == nil)
        }
    }

    /// An enum with associated values is encoded as an object whose one key names the case. When the stored case is
    /// not the default's, "merging objects at every depth" adds the default's case key next to the stored one, and the
    /// merged object decodes as no enum; the fill is abandoned as a whole, although the type decodes the bytes with
    /// only the new field added (the documented minimal fill). The user's drawing is moved aside and replaced by the
    /// default.
    @Test func aStoredEnumCaseOtherThanTheDefaultsDoesNotKeepAnAddedFieldFromBeingFilledIn() throws {
        try withTemporaryDirectory { directory in
            // Stored by the earlier version, which had no `visits`.
            try write(#"{"name":"logo","shape":{"square":{"side":4}}}"#, key: "drawing", in: directory)
            let defaultDrawing = Drawing(name: "new", shape: .circle(radius: 1), visits: 0)
            let storage = WLStorage(
                key: "drawing", defaultValue: defaultDrawing, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue == Drawing(name: "logo", shape: .square(side: 4), visits: 0))
            #expect(!entries(of: directory).contains { $0.hasPrefix("drawing~corrupt-") })
        }
    }

    /// Something other than a file stands at `NAME~before-type-change` (a directory): the copy of the bytes cannot be
    /// made there, but the "create without replacing" that makes it only reports that the name is taken, which the
    /// backer reads as "kept by an earlier run". The file is rewritten in the new shape and its bytes from before the
    /// type change are kept nowhere, though the documentation says that a value whose copy cannot be made is not
    /// written back.
    @Test func aDirectoryAtTheKeptCopysNameDoesNotLetTheRewriteLoseTheOldBytes() throws {
        try withTemporaryDirectory { directory in
            let old = #"{"title":"main"}"#
            try write(old, key: "window", in: directory)
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("window~before-type-change"), withIntermediateDirectories: false)
            let storage = WLStorage(
                key: "window", defaultValue: PanedWindow(name: "new", pane: WindowPane()), flushInterval: nil,
                store: .directory(directory), migrations: panedWindowMigrations)
            #expect(storage.wrappedValue.name == "main")
            storage.flush()
            // Either the file keeps its old bytes, or they are kept somewhere in the directory.
            let keptSomewhere = entries(of: directory).contains { name in
                let url = directory.appendingPathComponent(name)
                return FileManager.default.contents(atPath: url.path) == Data(old.utf8)
            }
            #expect(keptSomewhere, "the bytes from before the type change are lost: \(entries(of: directory))")
        }
    }
}
