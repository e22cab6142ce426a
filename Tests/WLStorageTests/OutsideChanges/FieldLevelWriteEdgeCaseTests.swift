// The edges of the field-level write: a storage's write onto another program's change must not lose that change, write
// bytes that no one can read, or leave the storage apart from its file.
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput, .serialized) struct FieldLevelWriteEdgeCaseTests {
    enum Mode: Codable, Sendable, Equatable {
        case dark(level: Int)
        case light
        case custom(String)
    }

    struct Prefs: Codable, Sendable, Equatable {
        var theme: String
        var fontSize: Int
        var mode: Mode = .dark(level: 1)
    }

    final class Themes: Sendable { let list = Lock<[String]>([]) }

    static let key = "prefs"
    static let initial = #"{"fontSize":15,"mode":{"dark":{"level":1}},"theme":"dark"}"#
    static let defaultValue = Prefs(theme: "light", fontSize: 13)

    static func object(in directory: URL) throws -> [String: Any] {
        let data = try #require(contents(of: key, in: directory))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func decoded(in directory: URL) -> Prefs? {
        guard let data = contents(of: key, in: directory) else { return nil }
        return try? JSONDecoder().decode(Prefs.self, from: data)
    }

    static func json(_ object: [String: Any]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    static func openedStorage(in directory: URL) throws -> WLStorage<Prefs> {
        try Data(initial.utf8).write(to: directory.appendingPathComponent(key))
        let storage = manualStorage(key, in: directory, default: defaultValue)
        try #require(storage.wrappedValue.theme == "dark")
        return storage
    }

    // MARK: - 1. A member this storage does not know, seen while a change was pending

    /// Another version adds `lineSpacing: 1`; the check sees it while `fontSize` is pending. That version then sets
    /// `lineSpacing: 2` (unseen). The write must not restore `lineSpacing: 1`, a field this storage never changed.
    @Test func anUnknownMemberChangedAfterTheCheckSawItKeepsTheOtherProgramsLastValue() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                let storage = try Self.openedStorage(in: directory)
                storage.wrappedValue.fontSize = 16
                try replaceFromOutside(
                    url, with: #"{"fontSize":15,"lineSpacing":1,"mode":{"dark":{"level":1}},"theme":"dark"}"#)
                try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(
                        url, with: #"{"fontSize":15,"lineSpacing":2,"mode":{"dark":{"level":1}},"theme":"dark"}"#)
                    storage.flush()
                }
                let object = try Self.object(in: directory)
                #expect(object["fontSize"] as? Int == 16)
                #expect(object["lineSpacing"] as? Int == 2, "the other program's last lineSpacing was undone")
            }
        }
    }

    /// Same, the other version then removes the member: the write must not bring it back.
    @Test func anUnknownMemberRemovedAfterTheCheckSawItStaysRemoved() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                let storage = try Self.openedStorage(in: directory)
                storage.wrappedValue.fontSize = 16
                try replaceFromOutside(
                    url, with: #"{"fontSize":15,"lineSpacing":1,"mode":{"dark":{"level":1}},"theme":"dark"}"#)
                try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(url, with: Self.initial)
                    storage.flush()
                }
                let object = try Self.object(in: directory)
                #expect(object["fontSize"] as? Int == 16)
                #expect(object["lineSpacing"] == nil, "a member the other program removed was written back")
            }
        }
    }

    // MARK: - 2. Merges that the value's type cannot read

    /// Another program resets the file to `{}`; this storage changes `fontSize`. The merge alone would write
    /// `{"fontSize":16}`, which lacks the required `theme`: the members it lacks come from the value.
    @Test func aWriteOntoAnObjectMissingRequiredMembersLeavesAReadableFile() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let storage = try Self.openedStorage(in: directory)
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(directory.appendingPathComponent(Self.key), with: "{}")
                    storage.wrappedValue.fontSize = 16
                    storage.flush()
                }
                let text = String(decoding: contents(of: Self.key, in: directory) ?? Data(), as: UTF8.self)
                #expect(Self.decoded(in: directory)?.fontSize == 16, "the file holds \(text)")
                #expect(storage.lastError == nil)
            }
        }
    }

    /// An enum with associated values is a single-member object: one program changes its case, the other
    /// changes it to another case (or changes the payload of the old case). Merged member by member, both cases would
    /// stand, a value that no program decodes: the writer's case is taken whole.
    @Test(arguments: [Mode.custom("x"), Mode.dark(level: 2)])
    func twoProgramsChangingAnEnumsCaseLeaveOneCase(_ local: Mode) throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let storage = try Self.openedStorage(in: directory)
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(
                        directory.appendingPathComponent(Self.key),
                        with: #"{"fontSize":15,"mode":{"light":{}},"theme":"dark"}"#)
                    storage.wrappedValue.mode = local
                    storage.flush()
                }
                let text = String(decoding: contents(of: Self.key, in: directory) ?? Data(), as: UTF8.self)
                // Last writer of the field wins: this storage's case.
                #expect(Self.decoded(in: directory)?.mode == local, "the file holds \(text)")
                #expect(storage.lastError == nil)
            }
        }
    }

    // MARK: - 3. Without a base (no file when opened)

    /// No file at first: both programs start from the default. The other program creates the file with its
    /// `theme`; this storage sees it while its `fontSize` change is pending: its change, against the default, goes onto
    /// it.
    @Test func aFileCreatedByAnotherProgramWhileAChangeWasPendingKeepsItsFields() throws {
        try withTemporaryDirectory { directory in
            let storage = manualStorage(Self.key, in: directory, default: Self.defaultValue)
            #expect(storage.wrappedValue == Self.defaultValue)
            storage.wrappedValue.fontSize = 16
            try replaceFromOutside(
                directory.appendingPathComponent(Self.key),
                with: #"{"fontSize":13,"mode":{"dark":{"level":1}},"theme":"blue"}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            storage.flush()
            let stored = Self.decoded(in: directory)
            #expect(stored?.fontSize == 16)
            #expect(stored?.theme == "blue", "the other program's theme was overwritten")
        }
    }

    // MARK: - 4. Races inside the write.

    /// Sets `theme` of what the file holds now, as another program that reads and writes the file would.
    static func outsideSetsTheme(_ theme: String, in directory: URL) {
        let url = directory.appendingPathComponent(key)
        // Tried again when the read or the write fails (on a loaded machine a signal meant for another test's child
        // can interrupt it): a change of the other program that silently did not happen would look like one lost.
        for _ in 0..<100 {
            guard let data = FileManager.default.contents(atPath: url.path),
                var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
            else { continue }
            object["theme"] = theme
            if (try? replaceFromOutside(url, with: json(object))) != nil { return }
        }
        Issue.record("the other program could not set the theme to \(theme)")
    }

    /// Installs a plan that, while `armed` and up to `times` times, lets another program set `theme` just before this
    /// storage opens a temporary file: after the write read the file, before it is put in place.
    static func raceEachTemporaryFile(
        in directory: URL, armed: Switch, times: Int, themes: Themes
    ) {
        FaultInjection.install(
            { call, entry in
                guard call == .open, let entry, entry.contains("~"), armed.isOn else { return nil }
                armed.tally()
                if armed.tallied > times { return nil }
                let theme = "outside-\(armed.tallied)"
                themes.list.withLock { $0.append(theme) }
                outsideSetsTheme(theme, in: directory)
                return nil
            }, forDirectory: directory.standardizedFileURL.path)
    }

    /// The file is as this storage read it when the write reads it: another program's change of `theme` made between
    /// that read and the rename must not be overwritten (the write is made on condition of the version read).
    @Test func anotherProgramsChangeMadeDuringAnUnmergedWriteIsKept() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let storage = try Self.openedStorage(in: directory)
                let armed = Switch(true)
                let themes = Themes()
                Self.raceEachTemporaryFile(in: directory, armed: armed, times: 1, themes: themes)
                defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    storage.wrappedValue.fontSize = 16
                    storage.flush()
                }
                armed.set(false)
                let last = themes.list.withLock { $0.last }
                try #require(last != nil)
                let stored = Self.decoded(in: directory)
                #expect(stored?.fontSize == 16)
                #expect(stored?.theme == last, "the other program's theme, written during the write, was lost")
            }
        }
    }

    /// When another program keeps changing `theme` during the merged write, round after round, the change is reported
    /// and stays pending rather than replace the other program's last change of a field this storage never touched.
    @Test func anotherProgramsRepeatedChangesDuringAMergedWriteAreKept() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let storage = try Self.openedStorage(in: directory)
                let armed = Switch(true)
                let themes = Themes()
                Self.raceEachTemporaryFile(in: directory, armed: armed, times: 8, themes: themes)
                defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    Self.outsideSetsTheme("outside-0", in: directory)
                    storage.wrappedValue.fontSize = 16
                    storage.flush()
                }
                armed.set(false)
                // Every round lost to the other program: the change is reported and stays pending, to be tried again.
                #expect(storage.hasPendingChanges)
                #expect(storage.lastError?.code == .writeFailed)
                #expect(Self.decoded(in: directory)?.theme == themes.list.withLock { $0.last })
                storage.flush()
                #expect(storage.lastError == nil)
                let last = themes.list.withLock { $0.last }
                let stored = Self.decoded(in: directory)
                #expect(stored?.fontSize == 16)
                #expect(stored?.theme == last, "rounds raced: \(themes.list.withLock { $0 })")
                #expect(eventually(timeout: 60) { storage.wrappedValue == Self.decoded(in: directory) })
            }
        }
    }

    // MARK: - 5. The follow-up check fails.

    /// After a write over another program's change, the follow-up check cannot read the file (EIO) once: the storage
    /// must still come to hold what the file holds once reads work again.
    @Test func aFailedFollowUpCheckStillLeadsToTheOtherProgramsChange() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                try Data(Self.initial.utf8).write(to: directory.appendingPathComponent(Self.key))
                let storage = fileStorage(Self.key, in: directory, default: Self.defaultValue, flushInterval: nil)
                try #require(storage.wrappedValue.theme == "dark")
                let placed = Switch(false)
                let failing = Switch(true)
                FaultInjection.install(
                    { call, entry in
                        if call == .rename || call == .link { placed.set(true) }
                        if call == .open, entry == Self.key, placed.isOn, failing.isOn {
                            failing.tally()
                            return .fail(EIO)
                        }
                        return nil
                    }, forDirectory: directory.standardizedFileURL.path)
                defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(
                        directory.appendingPathComponent(Self.key),
                        with: #"{"fontSize":15,"mode":{"dark":{"level":1}},"theme":"blue"}"#)
                    storage.wrappedValue.fontSize = 16
                    storage.flush()
                }
                failing.set(false)
                #expect(failing.tallied > 0, "the follow-up check was not failed")
                #expect(Self.decoded(in: directory) == Prefs(theme: "blue", fontSize: 16))
                #expect(
                    eventually(timeout: 60) { storage.wrappedValue == Prefs(theme: "blue", fontSize: 16) },
                    "holds \(storage.wrappedValue), pending \(storage.hasPendingChanges), failed opens \(failing.tallied)"
                )
            }
        }
    }

    // MARK: - 6. Many rounds against a live outside writer, with sets and updates interleaved.

    /// Another program changes `theme` between each of this storage's changes of `fontSize` (sets and updates), with
    /// the monitor live: every change of each side stays, and the storage ends as the file.
    @Test func manyAlternatingChangesOfDifferentFieldsKeepEveryChange() throws {
        try withTemporaryDirectory { directory in
            let storage = try Self.openedStorage(in: directory)
            var lost: [String] = []
            for round in 1...150 {
                if round % 3 == 0 {
                    Self.outsideSetsTheme("o\(round)", in: directory)
                    storage.update { $0.fontSize = 1000 + round }
                } else {
                    // A set is a get, then a set (see Guarantees): made once the storage holds what the file holds, and
                    // before the other program's change, so that the monitor taking a change between the two does not
                    // make it carry the theme of before (which then counts as a change of the theme, and is written).
                    try #require(eventually(timeout: 60) { storage.wrappedValue == Self.decoded(in: directory) })
                    storage.wrappedValue.fontSize = 1000 + round
                    Self.outsideSetsTheme("o\(round)", in: directory)
                }
                storage.flush()
                let stored = Self.decoded(in: directory)
                if stored?.fontSize != 1000 + round || stored?.theme != "o\(round)" {
                    lost.append(
                        "round \(round): \(String(describing: stored)), error \(String(describing: storage.lastError))")
                }
            }
            #expect(lost.isEmpty, "\(lost.prefix(5))")
            #expect(
                eventually(timeout: 60) {
                    storage.wrappedValue == Self.decoded(in: directory) && !storage.hasPendingChanges
                })
        }
    }

    /// The change pending while the other program's change is seen, then reverted to what was read: nothing of this
    /// storage is written, and the storage takes the other program's value.
    @Test func aChangeRevertedBeforeTheWriteTakesTheOtherProgramsValue() throws {
        try withTemporaryDirectory { directory in
            let storage = try Self.openedStorage(in: directory)
            storage.wrappedValue.fontSize = 16
            try replaceFromOutside(
                directory.appendingPathComponent(Self.key),
                with: #"{"fontSize":15,"mode":{"light":{}},"theme":"blue"}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            storage.wrappedValue.fontSize = 15
            storage.flush()
            let expected = Prefs(theme: "blue", fontSize: 15, mode: .light)
            #expect(Self.decoded(in: directory) == expected)
            #expect(eventually(timeout: 60) { storage.wrappedValue == expected && !storage.hasPendingChanges })
        }
    }

    /// removeUnknownFields with a concurrent change of a known field by another program: the unknown member goes, the
    /// other program's change stays.
    @Test func removingUnknownFieldsOntoAnotherProgramsChangeKeepsItsChange() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                try Data(#"{"extra":1,"fontSize":15,"mode":{"dark":{"level":1}},"theme":"dark"}"#.utf8).write(to: url)
                let storage = manualStorage(Self.key, in: directory, default: Self.defaultValue)
                try #require(storage.wrappedValue.theme == "dark")
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(
                        url, with: #"{"extra":1,"fontSize":15,"mode":{"dark":{"level":1}},"theme":"blue"}"#)
                    storage.removeUnknownFields()
                    storage.wrappedValue.fontSize = 16
                    storage.flush()
                }
                let object = try Self.object(in: directory)
                #expect(object["extra"] == nil)
                #expect(object["theme"] as? String == "blue")
                #expect(object["fontSize"] as? Int == 16)
            }
        }
    }

    /// A file replaced by garbage, then by another program's valid change, while a change is pending.
    @Test func garbageThenAValidChangeWhilePendingKeepsBothChanges() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent(Self.key)
            let storage = try Self.openedStorage(in: directory)
            storage.wrappedValue.fontSize = 16
            try replaceFromOutside(url, with: "not json")
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            try replaceFromOutside(url, with: #"{"fontSize":15,"mode":{"dark":{"level":1}},"theme":"blue"}"#)
            try #require(eventually(timeout: 60) { hasHeardWhatIsStored(storage) })
            storage.flush()
            #expect(Self.decoded(in: directory) == Prefs(theme: "blue", fontSize: 16))
            #expect(eventually(timeout: 60) { storage.wrappedValue == Prefs(theme: "blue", fontSize: 16) })
        }
    }

    struct Bag: Codable, Sendable, Equatable {
        var counts: [String: Int]
        var note: String?
        var size: Int
    }

    /// Dictionary entries added and removed on each side, and an optional set to nil here while the other program
    /// changes another field: all kept.
    @Test func dictionaryEntriesAndANilOptionalMergeEntryByEntry() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                try Data(#"{"counts":{"a":1,"b":2},"note":"n","size":1}"#.utf8).write(to: url)
                let storage = manualStorage(Self.key, in: directory, default: Bag(counts: [:], note: nil, size: 0))
                try #require(storage.wrappedValue.size == 1)
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(url, with: #"{"counts":{"b":2,"c":3},"note":"n","size":2}"#)
                    storage.wrappedValue.counts["b"] = nil
                    storage.wrappedValue.counts["d"] = 4
                    storage.wrappedValue.note = nil
                    storage.flush()
                }
                let expected = Bag(counts: ["c": 3, "d": 4], note: nil, size: 2)
                let data = try #require(contents(of: Self.key, in: directory))
                #expect(try JSONDecoder().decode(Bag.self, from: data) == expected)
                #expect(eventually(timeout: 60) { storage.wrappedValue == expected && !storage.hasPendingChanges })
            }
        }
    }

    /// A value of an optional type too large to be kept decoded (over 64 KiB) is merged against the bytes it was read
    /// from: a kept value looked for and not found must not be taken for a `nil` of the type, whose `null` would make
    /// the change go whole and undo the other program's.
    @Test func anOptionalValueTooLargeToKeepDecodedGoesOntoAnotherProgramsChangeFieldByField() throws {
        struct Notes: Codable, Sendable, Equatable {
            var theme: String
            var fontSize: Int
            var text: String
        }
        let text = String(repeating: "n", count: 70_000)
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                try Data(#"{"fontSize":15,"text":"\#(text)","theme":"dark"}"#.utf8).write(to: url)
                let storage: WLStorage<Notes?> = manualStorage(Self.key, in: directory, default: nil)
                try #require(storage.wrappedValue?.theme == "dark")
                storage.wrappedValue?.fontSize = 16
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(url, with: #"{"fontSize":15,"text":"\#(text)","theme":"light"}"#)
                    storage.flush()
                }
                let object = try Self.object(in: directory)
                #expect(object["fontSize"] as? Int == 16)
                #expect(object["theme"] as? String == "light", "the other program's change was undone")
            }
        }
    }
}
