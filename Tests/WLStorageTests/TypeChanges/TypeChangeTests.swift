import Foundation
import Testing

@testable import WLStorage

// The types of one stored value through the versions of a program.

private struct ProfileV1: Codable, Equatable {
    var name: String
}

private struct Window: Codable, Equatable {
    var width = 800
    var height = 600
}

private struct ProfileV2: Codable, Equatable {
    var name: String
    var visits: Int
    var window: Window
    var tags: [String]
}

private struct SettingsV1: Codable {
    var darkMode: Bool
    var fontSize: String
}

private struct SettingsV2: Codable {
    var theme: String
    var fontSize: String
}

private struct Settings: Codable, Equatable {
    var theme: String
    var fontSize: Double
}

private struct ConversionFailed: Error, CustomStringConvertible {
    var description: String { "no font size" }
}

private let defaultProfile = ProfileV2(name: "new", visits: 5, window: Window(), tags: ["a"])
private let defaultSettings = Settings(theme: "light", fontSize: 13)

/// Settings from two versions ago go through the version in between.
private let settingsMigrations: [WLStorageMigration<Settings>] = [
    .from(SettingsV2.self) { old in
        guard let size = Double(old.fontSize) else { throw ConversionFailed() }
        return Settings(theme: old.theme, fontSize: size)
    },
    WLStorageMigration.from(SettingsV1.self) { old in
        SettingsV2(theme: old.darkMode ? "dark" : "light", fontSize: old.fontSize)
    }.then { middle in
        guard let size = Double(middle.fontSize) else { throw ConversionFailed() }
        return Settings(theme: middle.theme, fontSize: size)
    },
]

@Suite(.capturingOutput)
struct TypeChangeTests: StoredFileSuite {
    private func kept(_ key: String) -> String { key + "~before-type-change" }

    @Test func aTypeThatGainedFieldsTakesThemFromTheDefaultAndWritesThemWithItsNextChange() throws {
        try withTemporaryDirectory { directory in
            let old = #"{"name":"ada","window":{"width":1024}}"#
            try write(old, key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: defaultProfile, flushInterval: nil, store: .directory(directory))
            // The file's fields win, at every depth; the missing ones come from the default.
            #expect(
                storage.wrappedValue
                    == ProfileV2(name: "ada", visits: 5, window: Window(width: 1024, height: 600), tags: ["a"]))
            #expect(storage.lastError == nil)
            // Reading never writes: the file keeps its shape, and nothing is kept beside it.
            #expect(!storage.hasPendingChanges)
            storage.flush()
            #expect(contents("profile", in: directory) == old)
            #expect(entries(of: directory) == ["profile"])
            // The next change writes the value whole, in the new shape.
            storage.wrappedValue.visits += 1
            storage.flush()
            #expect(stored(ProfileV2.self, key: "profile", in: directory) == storage.wrappedValue)
            #expect(entries(of: directory) == ["profile"])
        }
    }

    @Test func aFileInTheCurrentShapeIsNeitherKeptNorRewritten() throws {
        try withTemporaryDirectory { directory in
            let current = #"{"name":"ada","tags":[],"visits":1,"window":{"height":2,"width":1}}"#
            try write(current, key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: defaultProfile, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.visits == 1)
            #expect(!storage.hasPendingChanges)
            storage.flush()
            #expect(entries(of: directory) == ["profile"])
            #expect(contents("profile", in: directory) == current)
        }
    }

    @Test func aTypeThatLostAFieldReadsTheFileAsItIs() throws {
        try withTemporaryDirectory { directory in
            let old = #"{"name":"ada","visits":3,"window":{"height":2,"width":1},"tags":[],"retired":true}"#
            try write(old, key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: defaultProfile, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.visits == 3)
            #expect(!storage.hasPendingChanges)
            #expect(entries(of: directory) == ["profile"])
            #expect(storage.lastError == nil)
        }
    }

    @Test func aRenamedFieldGoesThroughAMigrationAndAFieldOfAnotherTypeThroughTwo() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"darkMode":true,"fontSize":"15.5"}"#, key: "v1", in: directory)
            try write(#"{"theme":"sepia","fontSize":"12"}"#, key: "v2", in: directory)
            let v1 = WLStorage(
                key: "v1", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            let v2 = WLStorage(
                key: "v2", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            #expect(v1.wrappedValue == Settings(theme: "dark", fontSize: 15.5))
            #expect(v2.wrappedValue == Settings(theme: "sepia", fontSize: 12))
            #expect(contents(kept("v1"), in: directory) == #"{"darkMode":true,"fontSize":"15.5"}"#)
            v1.flush()
            v2.flush()
            #expect(stored(Settings.self, key: "v1", in: directory) == Settings(theme: "dark", fontSize: 15.5))
            #expect(stored(Settings.self, key: "v2", in: directory) == Settings(theme: "sepia", fontSize: 12))
            #expect(entries(of: directory) == ["v1", "v2"])
        }
    }

    @Test func aMigrationWhoseTypeDecodesTheBytesWinsOverFillingInFieldsThatWouldDropOneOfTheirs() throws {
        struct Before: Codable {
            var darkMode: Bool
            var fontSize: Double
        }
        try withTemporaryDirectory { directory in
            // Filled in from the default, these bytes would decode as Settings with the default theme, and the
            // renamed field would be lost.
            try write(#"{"darkMode":true,"fontSize":18}"#, key: "renamed", in: directory)
            let renamed = WLStorage(
                key: "renamed", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: [
                    .from(Before.self) { Settings(theme: $0.darkMode ? "dark" : "light", fontSize: $0.fontSize) }
                ])
            #expect(renamed.wrappedValue == Settings(theme: "dark", fontSize: 18))
            // With no migration that applies, bytes with a field the type does not know and without one it needs are
            // another version's that this one maps: the field it knows is read, the one it lacks comes from the
            // default, and nothing is written.
            try write(#"{"retired":true,"fontSize":18}"#, key: "reshaped", in: directory)
            let reshaped = WLStorage(
                key: "reshaped", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            #expect(reshaped.wrappedValue == Settings(theme: defaultSettings.theme, fontSize: 18))
            #expect(reshaped.lastError == nil)
            #expect(!reshaped.hasPendingChanges)
            #expect(contents("reshaped", in: directory) == #"{"retired":true,"fontSize":18}"#)
            // A migration that reads the bytes and throws leaves them another version's.
            try write(#"{"darkMode":true,"fontSize":18,"retired":1}"#, key: "failed", in: directory)
            let failed = WLStorage(
                key: "failed", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: [.from(Before.self) { _ in throw CocoaError(.coderInvalidValue) }])
            #expect(failed.wrappedValue == defaultSettings)
            #expect(failed.lastError?.code == .storedByAnotherVersion)
        }
    }

    @Test func aMigrationThatThrowsLeavesTheNextOneToTryAndWhenNoneWorksTheFileIsLeftAsItIs() throws {
        try withTemporaryDirectory { directory in
            let unconvertible = #"{"theme":"dark","fontSize":"large"}"#
            try write(unconvertible, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            #expect(storage.wrappedValue == defaultSettings)
            let error = try #require(
                ReportedErrors.errors(under: directory).first { $0.code == .storedByAnotherVersion })
            #expect(error.message.contains("the migration from SettingsV2 threw no font size"))
            // Not moved aside, not replaced by the default: the version that stored it may still read it.
            storage.flush()
            #expect(entries(of: directory) == ["settings"])
            #expect(contents("settings", in: directory) == unconvertible)

            // A throwing migration earlier in the list does not stop a later one.
            try write(#"{"darkMode":false,"fontSize":"9"}"#, key: "other", in: directory)
            let throwing: [WLStorageMigration<Settings>] =
                [.from(SettingsV1.self) { _ in throw ConversionFailed() }] + settingsMigrations
            let other = WLStorage(
                key: "other", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: throwing)
            #expect(other.wrappedValue == Settings(theme: "light", fontSize: 9))
        }
    }

    @Test(arguments: ["not json", #"{"colour":"#, "\u{FF}"])
    func aFileThatIsNotJSONIsMovedAsideAsBefore(contents old: String) throws {
        try withTemporaryDirectory { directory in
            try write(old, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            #expect(storage.wrappedValue == defaultSettings)
            #expect(ReportedErrors.errors(under: directory).contains { $0.code == .decodingFailed })
            let names = entries(of: directory)
            #expect(!names.contains(kept("settings")))
            let aside = try #require(names.first { $0.hasPrefix("settings~corrupt-") })
            #expect(contents(aside, in: directory) == old)
        }
    }

    @Test(arguments: [#"{"colour":"red"}"#, "[1,2]", #""text""#, "{}"])
    func jsonThatMatchesNothingIsLeftAsItIsAndNotReplacedByTheDefault(contents old: String) throws {
        try withTemporaryDirectory { directory in
            try write(old, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: defaultSettings, flushInterval: 0, store: .directory(directory),
                migrations: settingsMigrations)
            #expect(storage.wrappedValue == defaultSettings)
            #expect(storage.lastError?.code == .storedByAnotherVersion)
            storage.flush()
            #expect(entries(of: directory) == ["settings"])
            #expect(contents("settings", in: directory) == old)
        }
    }

    @Test func bytesKeptByAnEarlierRunThatEndedBeforeItsWriteAreKeptAsTheyWere() throws {
        try withTemporaryDirectory { directory in
            // A run read the old file, kept it, and was killed before it wrote: the file is still in the old shape.
            let first = #"{"darkMode":false,"fontSize":"9"}"#
            try write(first, key: kept("settings"), in: directory)
            try write(#"{"darkMode":true,"fontSize":"15"}"#, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            #expect(storage.wrappedValue == Settings(theme: "dark", fontSize: 15))
            #expect(contents(kept("settings"), in: directory) == first)
            storage.flush()
            #expect(entries(of: directory) == ["settings"])
        }
    }

    @Test func aFailedRewriteKeepsTheOldBytesUntilAWriteSucceeds() throws {
        try withTemporaryDirectory { directory in
            let old = #"{"darkMode":true,"fontSize":"15"}"#
            try write(old, key: "settings", in: directory)
            let storage = WLStorage(
                key: "settings", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            // The directory refuses writes: the rewrite fails and stays pending, and the old bytes stay.
            chmod(directory.path, 0o500)
            defer { chmod(directory.path, 0o700) }
            if getuid() != 0 {
                storage.flush()
                #expect(storage.hasPendingChanges)
                #expect(contents(kept("settings"), in: directory) == old)
            }
            chmod(directory.path, 0o700)
            storage.flush()
            #expect(!storage.hasPendingChanges)
            #expect(entries(of: directory) == ["settings"])
        }
    }

    @Test func anotherProgramsValueInAnEarlierShapeIsAdoptedButNotRewritten() async throws {
        try await withTemporaryDirectory { directory in
            let storage = WLStorage(
                key: "settings", defaultValue: defaultSettings, flushInterval: nil, store: .directory(directory),
                migrations: settingsMigrations)
            storage.flush()
            let older = #"{"darkMode":true,"fontSize":"20"}"#
            try replaceFromOutside(directory.appendingPathComponent("settings"), with: older)
            #expect(await waitUntil { storage.wrappedValue == Settings(theme: "dark", fontSize: 20) })
            #expect(!storage.hasPendingChanges)
            #expect(contents("settings", in: directory) == older)
        }
    }

    @Test func storesOtherThanDirectoriesReshapeTheSameWay() throws {
        let store = MemoryStore()
        store.writeFromOutside("profile", json: #"{"name":"ada"}"#)
        store.writeFromOutside("settings", json: #"{"darkMode":true,"fontSize":"11"}"#)
        let profile = WLStorage(key: "profile", defaultValue: defaultProfile, flushInterval: nil, store: store)
        let settings = WLStorage(
            key: "settings", defaultValue: defaultSettings, flushInterval: nil, store: store,
            migrations: settingsMigrations)
        #expect(profile.wrappedValue.name == "ada")
        #expect(profile.wrappedValue.visits == 5)
        #expect(settings.wrappedValue == Settings(theme: "dark", fontSize: 11))
        // Filled in, not rewritten; migrated, rewritten, with the bytes as they were kept until then.
        #expect(!profile.hasPendingChanges)
        #expect(store.stored(kept("profile")) == nil)
        #expect(store.stored(kept("settings")) == #"{"darkMode":true,"fontSize":"11"}"#)
        profile.flush()
        settings.flush()
        #expect(try store.keys() == ["profile", "settings"])
        let data = try #require(store.stored("settings"))
        #expect(try JSONDecoder().decode(Settings.self, from: Data(data.utf8)) == settings.wrappedValue)
    }
}

@Suite(.capturingOutput)
struct JSONFillTests {
    /// The bytes `stored` decodes from as `T` once filled in from `defaults`, or `nil`.
    private func fill<T: Decodable>(_ stored: String, _ defaults: String, as type: T.Type) -> String? {
        let data = Data(stored.utf8)
        guard case .failure(let error) = Result(catching: { try JSONDecoder().decode(T.self, from: data) }) else {
            return nil
        }
        return JSONFill.filled(data, failing: error, from: Data(defaults.utf8), as: type).map {
            String(decoding: $0.bytes, as: UTF8.self)
        }
    }

    private struct Inner: Decodable {
        var x: String
        var y: Int
    }

    private struct Element: Decodable {
        var k: Int
    }

    private struct Nested: Decodable {
        var a: Double
        var b: [Int]
        var o: Inner
        var arr: [Element]
        var optional: Int?
    }

    private struct Pair: Decodable {
        var a: Int
        var b: Int
    }

    @Test func onlyTheMembersTheTypeCannotDoWithoutAreAddedAndTheStoredOnesStayByteForByte() {
        #expect(
            fill(
                #"{ "a" : 1.50, "o": {"x": "\u0041"}, "arr": [{"k":1}] }"#,
                #"{"a":2,"b":[3],"o":{"x":"B","y":7},"optional":5}"#, as: Nested.self)
                == #"{ "a" : 1.50, "o": {"x": "\u0041","y":7}, "arr": [{"k":1}] ,"b":[3]}"#)
    }

    @Test func keysAreComparedAsTheStringsTheyStandFor() {
        #expect(fill(#"{"\u0061":1}"#, #"{"a":2,"b":3}"#, as: Pair.self) == #"{"\u0061":1,"b":3}"#)
    }

    @Test func anotherCaseOfAnEnumIsKeptAsItIs() {
        enum Shape: Codable {
            case circle(radius: Int)
            case square(side: Int)
        }
        struct Drawing: Codable {
            var shape: Shape
            var visits: Int
        }
        let defaults = #"{"shape":{"circle":{"radius":1}},"visits":3}"#
        #expect(
            fill(#"{"shape":{"square":{"side":2}}}"#, defaults, as: Drawing.self)
                == #"{"shape":{"square":{"side":2}},"visits":3}"#)
    }

    @Test func nothingIsFilledWhenNothingIsMissingOrWhatIsMissingHasNoCounterpart() {
        #expect(fill(#"{"a":1,"b":2}"#, #"{"a":2,"b":3}"#, as: Pair.self) == nil)
        #expect(fill("[1]", #"{"a":2,"b":3}"#, as: Pair.self) == nil)
        #expect(fill(#"{"a":1"#, #"{"b":2}"#, as: Pair.self) == nil)
        #expect(fill(#"{"a":1}"#, #"{"a":2}"#, as: Pair.self) == nil)  // the default lacks b too
        // A member missing inside an array's element has no counterpart in the default.
        #expect(
            fill(#"{"a":1,"b":[],"o":{"x":"","y":1},"arr":[{}]}"#, #"{"arr":[{"k":1}]}"#, as: Nested.self) == nil)
    }

    @Test func coverageTellsWhetherAValueKeepsAllOrAnyOfTheStoredMembers() {
        func coverage(_ stored: String, _ encoded: String) -> (Bool, Bool) {
            let result = JSONFill.coverage(of: Data(stored.utf8), in: Data(encoded.utf8))
            return (result.all, result.any)
        }
        #expect(coverage(#"{"a":1,"o":{"x":1}}"#, #"{"a":2,"b":3,"o":{"x":5,"y":1}}"#) == (true, true))
        #expect(coverage(#"{"a":1,"o":{"x":1,"z":2}}"#, #"{"a":2,"o":{"x":5}}"#) == (false, true))
        #expect(coverage(#"{"c":1}"#, #"{"a":2}"#) == (false, false))
        #expect(coverage("[1]", #"{"a":2}"#) == (false, false))
    }

    @Test func stringsWithBracesAndEscapedQuotesAreSkippedWhole() {
        struct Texts: Decodable {
            var s: String
            var t: [String]
            var u: Bool
        }
        #expect(
            fill(#"{"s":"}\"{[","t":["]","\\"]}"#, #"{"u":true}"#, as: Texts.self)
                == #"{"s":"}\"{[","t":["]","\\"],"u":true}"#)
    }
}
