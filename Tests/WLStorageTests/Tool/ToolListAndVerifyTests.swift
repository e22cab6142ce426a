import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `wlstorage list` and `verify`: every entry of a directory with its state, and what makes a directory fail.
@Suite(.capturingOutput) struct ToolListAndVerifyTests {
    @Test func listShowsEveryEntryWithItsKeySizeTimeAndState() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "alpha", "[1,2]"], in: root).status == 0)
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", #""x""#], in: root).status == 0)
            try Data("{nope".utf8).write(to: store.appendingPathComponent("broken"))
            try Data("7".utf8).write(to: store.appendingPathComponent("alpha~corrupt-20240101T000000Z-ab"))
            let temporary = store.appendingPathComponent("alpha~0123456789abcdef.tmp")
            try Data("[1".utf8).write(to: temporary)
            // A symlink out of the directory, to a sentinel file in the test's folder, is listed, not followed.
            let sentinel = try Sentinel(in: root)
            try FileManager.default.createSymbolicLink(
                atPath: store.appendingPathComponent("link").path, withDestinationPath: sentinel.path)

            // The temporary file's writer is at work: it holds the file's lock, so list leaves the file alone.
            let writer = try WriterLock(on: temporary)
            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            writer.release()
            #expect(list.status == 0)
            let lines = list.stdout.split(separator: "\n").map(String.init)
            func line(_ name: String) -> [String] {
                lines.first { $0.hasPrefix(name + " ") }?.split(separator: " ").map(String.init) ?? []
            }
            let hashed = "c14cddc033f64b9dea80ea675cf280a015e672516090a5626781153dc68fea11"  // SHA-256 of "a/b"
            #expect(lines.count == 7)
            #expect(line("alpha").count == 5)
            #expect(line("alpha").first == "alpha")
            #expect(line("alpha").dropFirst().first == "alpha")
            #expect(line("alpha").dropFirst(2).first == "5")
            #expect(line("alpha").last == "json")
            #expect(line(hashed).dropFirst().first == "(hashed)")
            #expect(line(hashed).last == "json")
            #expect(line("broken").suffix(2) == ["invalid", "JSON"])
            #expect(line("alpha~corrupt-20240101T000000Z-ab").suffix(2) == ["moved", "aside"])
            #expect(line("alpha~0123456789abcdef.tmp").last == "temporary")
            #expect(line("link").last == "symlink")
            #expect(sentinel.isUnchanged)
            for name in ["alpha", hashed, "broken"] {
                let time = try #require(line(name).dropFirst(3).first)
                #expect(time.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/) != nil)
            }
        }
    }

    @Test func listWithKeysShowsTheirFilesNamedByTheKeyAndSaysWhichKeysHaveNoValue() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", #""x""#], in: root).status == 0)
            #expect(try await ToolRun.run(["--dir", store.path, "set", "plain", "1"], in: root).status == 0)
            #expect(try await ToolRun.run(["--dir", store.path, "set", "other", "2"], in: root).status == 0)
            let hashed = "c14cddc033f64b9dea80ea675cf280a015e672516090a5626781153dc68fea11"  // SHA-256 of "a/b"
            try Data("{".utf8).write(to: store.appendingPathComponent(hashed + "~corrupt-20240101T000000Z-ab"))

            let list = try await ToolRun.run(["--dir", store.path, "list", "a/b", "absent", "plain"], in: root)
            #expect(list.status == 1)
            let rows = list.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            try #require(
                rows.map { $0.prefix(2) } == [
                    ["NAME", "KEY"], [hashed, "a/b"], [hashed + "~corrupt-20240101T000000Z-ab", "a/b"],
                    ["absent", "absent"],
                    ["plain", "plain"],
                ])
            #expect(rows[1].last == "json")
            #expect(rows[3].dropFirst(2) == ["-", "-", "no", "value", "(no", "file)"])

            // Without keys, every entry, and the file of a hash named as such.
            let all = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(all.status == 0)
            let keys = all.stdout.split(separator: "\n").map { $0.split(separator: " ").prefix(2).map(String.init) }
            #expect(keys.contains([hashed, "(hashed)"]))
            #expect(keys.contains(["other", "other"]))
        }
    }

    @Test func verifyPassesWhenEveryKeyFileHoldsJSON() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            for (key, json) in [("count", "3"), ("a/b", #"{"x":[]}"#), ("nothing", "null")] {
                #expect(try await ToolRun.run(["--dir", store.path, "set", key, json], in: root).status == 0)
            }
            // An empty file reads as the default value, and a moved-aside file is the library's own record.
            try Data().write(to: store.appendingPathComponent("empty"))
            try Data("{".utf8).write(to: store.appendingPathComponent("count~corrupt-20240101T000000Z-ab"))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)
            #expect(!verify.stdout.contains("bad:"))
            #expect(verify.stdout.contains("no problems"))
        }
    }

    @Test func verifyAndListNoteTheBytesKeptFromBeforeATypeChangeAsTheLibraryLeftThem() async throws {
        struct Before: Codable {
            var login: String
        }
        struct After: Codable, Equatable {
            var name: String
            var visits: Int
        }
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(
                try await ToolRun.run(["--dir", store.path, "set", "profile", #"{"login":"ada"}"#], in: root).status
                    == 0)
            // The program now reads the value through a migration, and has not written it back yet.
            let storage = WLStorage(
                key: "profile", defaultValue: After(name: "", visits: 1), flushInterval: nil, store: .directory(store),
                migrations: [.from(Before.self) { After(name: $0.login, visits: 1) }])
            #expect(storage.wrappedValue == After(name: "ada", visits: 1))
            #expect(entries(of: store) == ["profile", "profile~before-type-change"])

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)
            #expect(
                verify.stdout.contains(
                    "note: profile~before-type-change: what the key's file held before its type changed;"))
            #expect(verify.stdout.contains("1 key file checked in \(store.path): no problems"))
            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            let line = try #require(
                list.stdout.split(separator: "\n").first { $0.hasPrefix("profile~before-type-change") })
            #expect(line.contains("before type change"))
            #expect(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first == "profile")

            storage.flush()
            #expect(entries(of: store) == ["profile"])
        }
    }

    @Test(arguments: BadEntry.allCases)
    func verifyExitsWithOneAndNamesEachBadEntry(entry: BadEntry) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "good", "1"], in: root).status == 0)
            try entry.make(in: store)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            let bad = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("bad: ") }
            #expect(bad.count == 1)
            #expect(bad.first?.hasPrefix("bad: \(entry.name): ") == true)
            #expect(!verify.stdout.contains("bad: good:"))
        }
    }

    @Test func verifyOfAMissingDirectoryExitsWithOne() async throws {
        try await withTemporaryDirectory { root in
            let verify = try await ToolRun.run(["--dir", root.appendingPathComponent("none").path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(verify.stderr.contains("no storage directory"))
        }
    }
}

extension ToolListAndVerifyTests {
    /// An entry that makes `verify` fail.
    enum BadEntry: String, CaseIterable, Sendable {
        case notJSON, notAKeysFileName, symlink, directory

        var name: String {
            switch self {
            case .notJSON: "broken"
            case .notAKeysFileName: "report~draft.tmp"
            case .symlink: "link"
            case .directory: "folder"
            }
        }

        func make(in store: URL) throws {
            let url = store.appendingPathComponent(name)
            switch self {
            case .notJSON: try Data("{\"a\":".utf8).write(to: url)
            case .notAKeysFileName: try Data("1".utf8).write(to: url)
            case .symlink: try FileManager.default.createSymbolicLink(atPath: url.path, withDestinationPath: "good")
            case .directory: try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
            }
        }
    }

}
