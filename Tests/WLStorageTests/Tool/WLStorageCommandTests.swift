import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The `wlstorage` command-line tool, run as a real child process from the build folder.
@Suite(.capturingOutput) struct WLStorageCommandTests {
    // MARK: set and get

    @Test func setThenGetRoundTripsTheValueThroughAPrivateFile() async throws {
        try await withTemporaryDirectory { root in
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent("store"), withIntermediateDirectories: false)
            let store = root.appendingPathComponent("store/nested")
            let json = #"{"name": "Ada", "tags": ["x", "y"], "ratio": 1.50, "empty": {}, "none": null}"#
            let set = try await ToolRun.run(["--dir", store.path, "set", "profile", json], in: root)
            #expect(set.status == 0)
            #expect(set.stdout.isEmpty)

            let file = store.appendingPathComponent("profile")
            let stored = try #require(FileManager.default.contents(atPath: file.path))
            // The text given is stored with the whitespace between tokens removed, numbers and order kept.
            #expect(
                String(decoding: stored, as: UTF8.self)
                    == #"{"name":"Ada","tags":["x","y"],"ratio":1.50,"empty":{},"none":null}"#)
            #expect(mode(of: file) == 0o600)
            #expect(mode(of: store) == 0o700)
            #expect(entries(of: store) == ["profile"])

            let get = try await ToolRun.run(["--dir", store.path, "get", "profile"], in: root)
            #expect(get.status == 0)
            #expect(
                get.stdout == """
                    {
                      "name": "Ada",
                      "tags": [
                        "x",
                        "y"
                      ],
                      "ratio": 1.50,
                      "empty": {},
                      "none": null
                    }

                    """)
        }
    }

    @Test(arguments: ["42", #""abc""#, "null", "true", "[]", "-1.5e3", "12345678901234567890"])
    func topLevelFragmentsAreStoredAndPrintedAsGiven(json: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "value", json], in: root).status == 0)
            let get = try await ToolRun.run(["--dir", store.path, "get", "value"], in: root)
            #expect(get.status == 0)
            #expect(get.stdout == json + "\n")
        }
    }

    @Test func getOfAKeyWithNoFileExitsWithOneAndSaysSoOnStandardError() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            let get = try await ToolRun.run(["--dir", store.path, "get", "absent"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains("no value stored for 'absent'"))
        }
    }

    @Test func getOfAFileThatIsNotJSONExitsWithOne() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            try Data("{nope".utf8).write(to: store.appendingPathComponent("broken"))
            let get = try await ToolRun.run(["--dir", store.path, "get", "broken"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains("does not hold JSON"))
        }
    }

    @Test(arguments: ["{nope", "", "tru", "1 2", #"{"a":}"#, "'single'", "NaN", "01"])
    func invalidJSONIsRefusedAndLeavesTheFileUnchanged(json: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(
                try await ToolRun.run(["--dir", store.path, "set", "kept", #"{"kept":true}"#], in: root).status == 0)
            let file = store.appendingPathComponent("kept")
            let before = try #require(FileManager.default.contents(atPath: file.path))

            let set = try await ToolRun.run(["--dir", store.path, "set", "kept", json], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.contains("not valid JSON"))
            #expect(FileManager.default.contents(atPath: file.path) == before)
            #expect(entries(of: store) == ["kept"])
        }
    }

    @Test(arguments: ["1e-400", "1e400", #"{"a":[1,-1e-400]}"#])
    func aNumberTheLibraryCannotDecodeIsRefusedWithTheReasonAndNothingIsWritten(json: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)

            let set = try await ToolRun.run(["--dir", store.path, "set", "k", json], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.contains("not valid JSON: the number "))
            #expect(set.stderr.contains(" is out of the range of a Double"))
            #expect(FileManager.default.contents(atPath: store.appendingPathComponent("k").path) == Data("1".utf8))
            #expect(entries(of: store) == ["k"])
        }
    }

    @Test func whyTheValueIsNotJSONIsSaidWithTheOffsetOfTheByte() async throws {
        try await withTemporaryDirectory { root in
            let set = try await ToolRun.run(["--dir", root.path, "set", "k", #"{"a": tru}"#], in: root)
            #expect(set.status == 1)
            #expect(set.stderr == "wlstorage: the value is not valid JSON: expected 'true', found '}' at byte 9\n")
        }
    }

    @Test func getListAndVerifyJudgeAFileByWhatTheLibraryCanDecode() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            try Data(#"{"v": 1e-400}"#.utf8).write(to: store.appendingPathComponent("tiny"))

            let get = try await ToolRun.run(["--dir", store.path, "get", "tiny"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains("does not hold JSON (the number 1e-400 is out of the range of a Double"))
            #expect(get.stderr.contains("at byte 6)"))

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.stdout.split(separator: "\n").last?.hasSuffix("invalid JSON") == true)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("bad: tiny: does not hold JSON: the number 1e-400 is out of the range"))
        }
    }

    /// A command line can hold any bytes; Swift's `CommandLine.arguments` would turn the invalid ones into U+FFFD, and
    /// the tool would store, hash or open something else than it was given.
    @Test(arguments: [
        #"set k $'"\xff"'"#, #"set $'k\xff' 1"#, #"--dir "$1"$'/x\xff' set k 1"#,
    ])
    func anArgumentThatIsNotUTF8IsAUsageErrorAndNothingIsWritten(arguments: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: false)
            // Bash's $'\xff' makes the byte 0xff, which no Swift string can hold.
            let script = #"exec "$0" --dir "$1" "# + arguments
            let run = try await ToolRun.run(
                ["-c", script, ToolRun.tool.path, store.path], executable: URL(fileURLWithPath: "/bin/bash"), in: root)
            #expect(run.status == 64)
            #expect(run.stderr.hasPrefix("wlstorage: argument "))
            #expect(run.stderr.contains(" is not UTF-8 (byte 0xff at byte "))
            #expect(entries(of: store).isEmpty)
            #expect(entries(of: root).filter { !$0.hasSuffix(".out") && !$0.hasSuffix(".err") } == ["store"])
        }
    }

    // MARK: hash, path, rm

    /// Known SHA-256 vectors: a key that is not a plain file name is stored under the hex digest of its UTF-8.
    @Test(arguments: [
        ("plain-Key_1.json", "plain-Key_1.json"),
        ("/", "8a5edab282632443219e051e4ade2d1d5bbc671c781051bf1437897cbdfea0f1"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (".", "cdb4ee2aea69cc6a83331bbe96dc2caa9a299d21329efb0336fc02a82e1839a8"),
        ("..", "5ec1f7e700f37c3d0b2981d04855fc34b94aaa15457b05ca571817442d228f81"),
    ])
    func hashPrintsTheFileNameAKeyMapsToWithoutNeedingADirectory(key: String, fileName: String) async throws {
        try await withTemporaryDirectory { root in
            let hash = try await ToolRun.run(["hash", key], in: root)
            #expect(hash.status == 0)
            #expect(hash.stdout == fileName + "\n")
        }
    }

    @Test(arguments: ["a/b", "ключ/é", "with space", "tilde~key", String(repeating: "k", count: 128)])
    func hashOfAnUnsafeKeyIsTheSHA256OfItsUTF8BytesAsSha256sumComputesIt(key: String) async throws {
        try await withTemporaryDirectory { root in
            let input = root.appendingPathComponent("key.txt")
            try Data(key.utf8).write(to: input)
            let reference = try await ToolRun.run(
                [input.path], executable: URL(fileURLWithPath: "/usr/bin/sha256sum"), in: root)
            try #require(reference.status == 0)
            let expected = try #require(reference.stdout.split(separator: " ").first.map(String.init))
            #expect(expected.count == 64)

            let hash = try await ToolRun.run(["hash", key], in: root)
            #expect(hash.status == 0)
            #expect(hash.stdout == expected + "\n")
        }
    }

    @Test func pathPrintsTheAbsolutePathOfTheKeysFileEvenForARelativeDirectory() async throws {
        try await withTemporaryDirectory { root in
            let plain = try await ToolRun.run(["--dir", "store", "path", "settings"], in: root)
            #expect(plain.status == 0)
            #expect(plain.stdout == root.appendingPathComponent("store/settings").path + "\n")

            let hashed = try await ToolRun.run(["--dir", "store", "path", "/"], in: root)
            #expect(hashed.status == 0)
            let digest = "8a5edab282632443219e051e4ade2d1d5bbc671c781051bf1437897cbdfea0f1"
            #expect(hashed.stdout == root.appendingPathComponent("store/" + digest).path + "\n")
        }
    }

    @Test func rmRemovesTheFileAndExitsWithOneWhenThereIsNone() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", "1"], in: root).status == 0)
            #expect(entries(of: store).count == 1)

            let first = try await ToolRun.run(["--dir", store.path, "rm", "a/b"], in: root)
            #expect(first.status == 0)
            #expect(entries(of: store).isEmpty)

            let second = try await ToolRun.run(["--dir", store.path, "rm", "a/b"], in: root)
            #expect(second.status == 1)
            #expect(second.stderr.contains("no value stored"))
        }
    }

    // MARK: list and verify

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

    // MARK: Temporary files

    @Test func verifyRemovesATemporaryFileLeftByACrashedWriterAndPasses() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            // A writer that crashed leaves its temporary file, unlocked.
            try Data("[1, 2".utf8).write(to: store.appendingPathComponent("key~0123456789abcdef.tmp"))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)
            #expect(
                verify.stdout
                    == "note: key~0123456789abcdef.tmp: removed: the temporary file of a writer that crashed\n"
                    + "1 key file checked in \(store.path): no problems\n")
            #expect(entries(of: store) == ["key"])
        }
    }

    @Test func listAndSetRemoveTemporaryFilesLeftByCrashedWritersAndSaySo() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            try Data("[".utf8).write(to: store.appendingPathComponent("key~0123456789abcdef.tmp"))
            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(!list.stdout.contains("~"))
            #expect(
                list.stderr.contains("removed the temporary file of a writer that crashed: key~0123456789abcdef.tmp"))
            #expect(entries(of: store) == ["key"])

            try Data("[".utf8).write(to: store.appendingPathComponent("other~fedcba9876543210.tmp"))
            let set = try await ToolRun.run(["--dir", store.path, "set", "key", "2"], in: root)
            #expect(set.status == 0)
            #expect(
                set.stderr.contains("removed the temporary file of a writer that crashed: other~fedcba9876543210.tmp"))
            #expect(entries(of: store) == ["key"])
        }
    }

    @Test func aTemporaryFileOfAWriterAtWorkIsANoteNotAProblemAndStays() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            let temporary = store.appendingPathComponent("key~0123456789abcdef.tmp")
            try Data("[1, 2".utf8).write(to: temporary)
            let writer = try WriterLock(on: temporary)
            defer { writer.release() }

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)
            #expect(
                verify.stdout
                    == "note: key~0123456789abcdef.tmp: the temporary file of a writer at work; not checked\n"
                    + "1 key file checked in \(store.path): no problems\n")
            #expect(entries(of: store) == ["key", "key~0123456789abcdef.tmp"])
        }
    }

    /// Only the writer's shape, `NAME~` and 16 lowercase hex digits and `.tmp`, is a temporary file; anything else
    /// with a `~` and `.tmp` is someone's file, which list, verify and set never remove.
    @Test(arguments: [
        "report~draft.tmp", "key~0123456789ABCDEF.tmp", "key~0123456789abcde.tmp", "~0123456789abcdef.tmp",
        "my key~0123456789abcdef.tmp", "key~0123456789abcdef.tmp.tmp",
    ])
    func aFileThatIsNotInTheWritersShapeIsNeverRemoved(name: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            try Data("a draft".utf8).write(to: store.appendingPathComponent(name))

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            let row = list.stdout.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            #expect(row?.hasSuffix(" other") == true)
            #expect(row?.dropFirst(name.count).split(separator: " ").first == "-")
            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("bad: \(name): not a file the library writes (no key maps to this name)"))
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "2"], in: root).status == 0)

            #expect(entries(of: store) == ["key", name].sorted())
            #expect(
                FileManager.default.contents(atPath: store.appendingPathComponent(name).path) == Data("a draft".utf8))
        }
    }

    /// A name such as `cursor.tmp` is not in the writers' shape: it is the file of the plain key `cursor.tmp`, which
    /// the library writes and reads, and which the tool lists, reads and checks as that key, and never removes.
    @Test func aKeyWhoseFileNameEndsInTmpIsAKeyLikeAnyOther() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            do {
                let storage = fileStorage("cursor.tmp", in: store, default: 0, flushInterval: nil)
                storage.wrappedValue = 42
                storage.flush()
                #expect(storage.lastError == nil)
            }
            #expect(entries(of: store) == ["cursor.tmp"])
            #expect(try await ToolRun.run(["--dir", store.path, "set", "other", "1"], in: root).status == 0)

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            let row = list.stdout.split(separator: "\n").first { $0.hasPrefix("cursor.tmp ") }
            #expect(row?.split(separator: " ").dropFirst().first == "cursor.tmp")
            #expect(row?.hasSuffix(" json") == true)
            let get = try await ToolRun.run(["--dir", store.path, "get", "cursor.tmp"], in: root)
            #expect(get.status == 0)
            #expect(get.stdout == "42\n")
            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)

            let reopened = fileStorage("cursor.tmp", in: store, default: 0, flushInterval: nil)
            #expect(reopened.wrappedValue == 42)
            #expect(entries(of: store) == ["cursor.tmp", "other"])
        }
    }

    /// A stray `cursor.tmp` that another program left, beside a crashed writer's `cursor~0123456789abcdef.tmp`: list
    /// shows the first as the key `cursor.tmp` and keeps it as it is, and removes the second.
    @Test func aStrayCursorTmpIsListedAsTheKeyCursorTmpAndKept() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: false)
            let stray = store.appendingPathComponent("cursor.tmp")
            try Data("7\n".utf8).write(to: stray)
            let crashed = store.appendingPathComponent("cursor~0123456789abcdef.tmp")
            try Data("[1".utf8).write(to: crashed)

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            let rows = list.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            let row = try #require(rows.first { $0.first == "cursor.tmp" }, "no row for cursor.tmp:\n\(list.stdout)")
            #expect(row.count == 5)
            #expect(row.dropFirst().first == "cursor.tmp")
            #expect(row.last == "json")
            #expect(!rows.contains { $0.first == crashed.lastPathComponent })
            #expect(
                list.stderr.contains(
                    "removed the temporary file of a writer that crashed: \(crashed.lastPathComponent)"))
            #expect(!list.stderr.contains("cursor.tmp"))
            #expect(entries(of: store) == ["cursor.tmp"])
            #expect(FileManager.default.contents(atPath: stray.path) == Data("7\n".utf8))

            let get = try await ToolRun.run(["--dir", store.path, "get", "cursor.tmp"], in: root)
            #expect(get.status == 0)
            #expect(get.stdout == "7\n")
        }
    }

    // MARK: Size

    /// A sparse file of 1 TiB takes no disk; read whole, it would take 1 TiB of memory.
    @Test func listVerifyAndGetReportAFileLargerThanTheMaximumValueSizeWithoutReadingIt() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "good", "1"], in: root).status == 0)
            let huge = store.appendingPathComponent("huge")
            let truncate = try await ToolRun.run(
                ["-s", "1T", huge.path], executable: URL(fileURLWithPath: "/usr/bin/truncate"), in: root)
            try #require(truncate.status == 0)
            let limit = ValueSizeLimit.defaultMaximum

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            let row = list.stdout.split(separator: "\n").first { $0.hasPrefix("huge ") }
            #expect(row?.hasSuffix(" too large") == true)
            #expect(row?.contains(" 1099511627776 ") == true)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(
                verify.stdout.contains(
                    "bad: huge: larger than the maximum value size the library reads (\(limit) bytes)\n"))
            #expect(verify.stdout.hasSuffix("2 key files checked in \(store.path): 1 problem\n"))

            let get = try await ToolRun.run(["--dir", store.path, "get", "huge"], in: root)
            #expect(get.status == 1)
            #expect(!get.signaled)
            #expect(get.stdout.isEmpty)
            #expect(
                get.stderr
                    == "wlstorage: the file of 'huge' is larger than the maximum value size the library reads "
                    + "(\(limit) bytes): \(huge.path)\n")
        }
    }

    @Test func aFileOfExactlyTheMaximumValueSizeIsCheckedAndOneByteMoreIsTooLarge() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            let limit = ValueSizeLimit.defaultMaximum
            var text = [UInt8](repeating: UInt8(ascii: "a"), count: limit)
            text[0] = UInt8(ascii: "\"")
            text[limit - 1] = UInt8(ascii: "\"")
            try Data(text).write(to: store.appendingPathComponent("full"))
            try Data(text + [UInt8(ascii: " ")]).write(to: store.appendingPathComponent("over"))
            text[limit / 2] = 0x01
            try Data(text).write(to: store.appendingPathComponent("full-bad"))

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            let rows = list.stdout.split(separator: "\n")
            #expect(rows.first { $0.hasPrefix("full ") }?.hasSuffix(" json") == true)
            #expect(rows.first { $0.hasPrefix("full-bad ") }?.hasSuffix(" invalid JSON") == true)
            #expect(rows.first { $0.hasPrefix("over ") }?.hasSuffix(" too large") == true)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            let bad = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("bad: ") }
            #expect(
                bad == [
                    "bad: full-bad: does not hold JSON: a control character (byte 0x01) in a string; write it as an "
                        + "escape at byte \(limit / 2)",
                    "bad: over: larger than the maximum value size the library reads (\(limit) bytes)",
                ])
        }
    }

    @Test func aFIFOIsReportedWithoutBeingOpenedForLongOrRead() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            try #require(mkfifo(store.appendingPathComponent("pipe").path, 0o600) == 0)

            let get = try await ToolRun.run(["--dir", store.path, "get", "pipe"], in: root)
            #expect(get.status == 1)
            #expect(get.stderr.contains("special file"))
            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.stdout.split(separator: "\n").last?.hasSuffix(" special file") == true)
            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.stdout.contains("bad: pipe: not a regular file (special file)"))
        }
    }

    // MARK: Names

    @Test func listPrintsEachNameOnOneLineWithControlCharactersAndInvalidUTF8Escaped() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "plain", "1"], in: root).status == 0)
            let names: [(bytes: [UInt8], printed: String)] = [
                (Array("esc\u{1b}[31mred".utf8), #"esc\x1b[31mred"#),
                (Array("forged  -  0  2024-01-01T00:00:00Z  json\nplain2".utf8), "forged  -  0"),
                (Array("two\nlines".utf8), #"two\nlines"#),
                (Array("bad".utf8) + [0xFF, 0xFE], #"bad\xff\xfe"#),
                (Array("tab\tand\\back".utf8), #"tab\tand\\back"#),
                (Array("del\u{7f}".utf8), #"del\x7f"#),
                (Array("rtl\u{202e}txt".utf8), #"rtl\xe2\x80\xaetxt"#),
                (Array("héllo-ключ".utf8), "héllo-ключ"),
            ]
            for name in names { try createFile(named: name.bytes, in: store, contents: Array("1".utf8)) }

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(!list.stdout.utf8.contains(0x1B))
            let lines = list.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(lines.count == 1 + 1 + names.count)  // the header, "plain", one line per name
            #expect(lines.filter { $0.hasPrefix("plain ") }.count == 1)
            for name in names {
                let line = try #require(lines.first { $0.hasPrefix(name.printed) }, "\(name.printed)")
                let columns = line.split(separator: " ", omittingEmptySubsequences: true)
                #expect(columns.dropFirst().first == "-", "no key maps to \(name.printed)")
                #expect(columns.last == "other", "\(name.printed)")
            }
            #expect(!lines.contains { $0.hasPrefix("plain2") })
        }
    }

    @Test func verifyReportsANameThatIsNotUTF8InsteadOfSkippingIt() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "good", "1"], in: root).status == 0)
            try createFile(named: Array("good".utf8) + [0xFF, 0xFE], in: store, contents: Array("2".utf8))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(
                verify.stdout.contains(#"bad: good\xff\xfe: not a file the library writes (its name is not UTF-8)"#))
            #expect(verify.stdout.hasSuffix(": 1 problem\n"))
        }
    }

    @Test func verifyEscapesTheNamesItReports() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            try createFile(named: Array("x\ny\u{1b}".utf8), in: store, contents: Array("{".utf8))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(!verify.stdout.utf8.contains(0x1B))
            let bad = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("bad: ") }
            #expect(bad == [#"bad: x\ny\x1b: not a file the library writes (no key maps to this name)"#])
        }
    }

    // MARK: watch

    @Test func watchPrintsTheCurrentValueThenEachNewDistinctValue() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let watch = try ToolRun(["--dir", store.path, "watch", "--count", "4", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))

            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)
            #expect(await watch.waitForLines(["(missing)", "1"]))

            // The same value again is not printed; a write by the library itself is.
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", " 1 "], in: root).status == 0)
            try WLStorageDefaultBacker<[String: Int]>(key: "k", directory: store).write(value: ["a": 2])
            #expect(await watch.waitForLines(["(missing)", "1", #"{"a":2}"#]))

            #expect(try await ToolRun.run(["--dir", store.path, "rm", "k"], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stdout == "(missing)\n1\n{\"a\":2}\n(missing)\n")
        }
    }

    @Test func watchWithACountOfTwoExitsAfterOneChange() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", #"{"v":1}"#], in: root).status == 0)
            let watch = try ToolRun(["--dir", store.path, "watch", "a/b", "--count=2"], in: root)
            #expect(await watch.waitForLines([#"{"v":1}"#]))
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", #"{"v": 2}"#], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stdout == "{\"v\":1}\n{\"v\":2}\n")
        }
    }

    @Test func watchReportsAValueTheLibraryCannotDecodeAndDoesNotPrintIt() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)
            let watch = try ToolRun(["--dir", store.path, "watch", "--count", "2", "k"], in: root)
            #expect(await watch.waitForLines(["1"]))
            try Data("[1e400]".utf8).write(to: store.appendingPathComponent("k"))
            #expect(await watch.waitForError { $0.contains("the number 1e400 is out of the range of a Double") })
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "2"], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stdout == "1\n2\n")
        }
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func watchEndsByTheSignalThatInterruptsIt(signal: Int32) async throws {
        try await withTemporaryDirectory { root in
            let watch = try ToolRun(["--dir", root.appendingPathComponent("store").path, "watch", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))
            watch.send(signal)
            let result = await watch.finish()
            #expect(result.signaled)
            #expect(result.status == signal)
        }
    }

    @Test func watchExitsWithOneWhenItsDirectoryIsRemoved() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let watch = try ToolRun(["--dir", store.path, "watch", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))
            try FileManager.default.removeItem(at: store)
            let result = await watch.finish()
            #expect(result.status == 1)
            #expect(!result.signaled)
            #expect(result.stderr.contains("removed or moved"))
        }
    }

    // MARK: A missing directory

    @Test func setCreatesAMissingStorageDirectoryWithMode0700AndSaysSo() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let first = try await ToolRun.run(["--dir", store.path, "set", "cursor", "1"], in: root)
            #expect(first.status == 0)
            #expect(first.stderr == "wlstorage: created the storage directory \(store.path)\n")
            #expect(mode(of: store) == 0o700)
            #expect(entries(of: store) == ["cursor"])

            let second = try await ToolRun.run(["--dir", store.path, "set", "cursor", "2"], in: root)
            #expect(second.status == 0)
            #expect(second.stderr.isEmpty)
        }
    }

    @Test(arguments: [["set", "cursor", "1"], ["watch", "cursor"]])
    func aMissingParentOfTheStorageDirectoryIsAnErrorAndNothingIsCreated(command: [String]) async throws {
        try await withTemporaryDirectory { root in
            let parent = root.appendingPathComponent("nonexistent")
            let store = parent.appendingPathComponent("dir")
            let run = try await ToolRun.run(["--dir", store.path] + command, in: root)
            #expect(run.status == 1)
            #expect(run.stdout.isEmpty)
            #expect(
                run.stderr
                    == "wlstorage: cannot create the storage directory \(store.path): its parent directory "
                    + "\(parent.path) does not exist\n")
            #expect(!FileManager.default.fileExists(atPath: parent.path))
        }
    }

    @Test func setIntoAPathThatIsAFileIsAnError() async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent("file")
            try Data("x".utf8).write(to: file)
            let set = try await ToolRun.run(["--dir", file.path, "set", "cursor", "1"], in: root)
            #expect(set.status == 1)
            #expect(set.stderr == "wlstorage: the storage directory path is not a directory: \(file.path)\n")
        }
    }

    @Test(arguments: [["get", "k"], ["rm", "k"], ["list"], ["verify"]])
    func aCommandOnAMissingDirectorySaysTheDirectoryIsMissing(command: [String]) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let run = try await ToolRun.run(["--dir", store.path] + command, in: root)
            #expect(run.status == 1)
            #expect(run.stdout.isEmpty)
            #expect(run.stderr == "wlstorage: no storage directory at \(store.path)\n")
            #expect(!FileManager.default.fileExists(atPath: store.path))
        }
    }

    @Test func pathOnAMissingDirectoryPrintsThePathAndSaysTheDirectoryIsMissing() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let path = try await ToolRun.run(["--dir", store.path, "path", "k"], in: root)
            #expect(path.status == 0)
            #expect(path.stdout == store.appendingPathComponent("k").path + "\n")
            #expect(path.stderr == "wlstorage: note: no storage directory at \(store.path)\n")
            #expect(!FileManager.default.fileExists(atPath: store.path))
        }
    }

    @Test func watchCreatesAMissingStorageDirectoryAndSaysSo() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let watch = try ToolRun(["--dir", store.path, "watch", "--count", "2", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))
            #expect(mode(of: store) == 0o700)
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stderr == "wlstorage: created the storage directory \(store.path)\n")
        }
    }

    @Test func withProgramAMissingProgramFolderIsAnErrorAndNothingIsCreated() async throws {
        try await withTemporaryDirectory { root in
            let data = root.appendingPathComponent("data")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: false)
            let set = try await ToolRun.run(
                ["--program", "myapp", "set", "k", "1"], environment: ["XDG_DATA_HOME": data.path], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.contains("its parent directory \(data.path)/myapp does not exist"))
            #expect(entries(of: data).isEmpty)
        }
    }

    // MARK: The default directory

    @Test(arguments: DefaultDirectoryCase.all)
    func withoutDirTheLibrarysDefaultDirectoryIsUsed(example: DefaultDirectoryCase) async throws {
        try await withTemporaryDirectory { root in
            let environment = example.environment.mapValues { $0.replacingOccurrences(of: "ROOT", with: root.path) }
            let expected = root.appendingPathComponent(example.expectedFile).path
            // The tool creates the storage directory, not its parents.
            try FileManager.default.createDirectory(
                at: URL(fileURLWithPath: expected).deletingLastPathComponent().deletingLastPathComponent(),
                withIntermediateDirectories: true)

            let set = try await ToolRun.run(example.options + ["set", "k", "7"], environment: environment, in: root)
            #expect(set.status == 0)
            #expect(FileManager.default.contents(atPath: expected) == Data("7".utf8))

            let path = try await ToolRun.run(example.options + ["path", "k"], environment: environment, in: root)
            #expect(path.stdout == expected + "\n")
        }
    }

    // MARK: Usage and help

    @Test(arguments: [
        [], ["bogus"], ["--dir"], ["--frob", "list"], ["--debug=yes", "--dir", "DIR", "list"],
        ["--dir", "DIR", "get"], ["--dir", "DIR", "set", "k"], ["--dir", "DIR", "get", "k", "extra"],
        ["--dir", "DIR", "list", "--bogus"], ["--dir", "DIR", "get", "k", "--count", "2"],
        ["--dir", "DIR", "watch", "k", "--count", "0"], ["--dir", "DIR", "watch", "k", "--count"],
        ["--dir", "DIR", "--program", "app", "list"], ["help", "nope"], ["get", "k"], ["list", "--dir", "DIR"],
    ])
    func usageErrorsExitWith64AndExplainOnStandardError(arguments: [String]) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store").path
            let run = try await ToolRun.run(arguments.map { $0 == "DIR" ? store : $0 }, in: root)
            #expect(run.status == 64)
            #expect(run.stdout.isEmpty)
            #expect(run.stderr.hasPrefix("wlstorage: "))
            #expect(entries(of: root).allSatisfy { $0 != "store" })
        }
    }

    @Test(arguments: [
        ["--help"], ["-h"], ["help"], ["--dir", "DIR", "--help"], ["help", "set"], ["get", "--help"],
        ["set", "-h"], ["rm", "--help"], ["path", "--help"], ["hash", "--help"], ["list", "--help"],
        ["verify", "--help"], ["watch", "--help"], ["--dir", "DIR", "get", "k", "--help"],
    ])
    func helpExitsWithZeroAndPrintsTheUsage(arguments: [String]) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store").path
            let run = try await ToolRun.run(arguments.map { $0 == "DIR" ? store : $0 }, in: root)
            #expect(run.status == 0)
            #expect(run.stderr.isEmpty)
            #expect(run.stdout.contains("wlstorage"))
            #expect(run.stdout.lowercased().contains("usage: "))
        }
    }

    @Test func theToolsHelpSaysHowTheDefaultDirectoryIsFound() async throws {
        try await withTemporaryDirectory { root in
            let help = try await ToolRun.run(["--help"], in: root)
            for text in ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME", "~/.local/share", ".wlstorage_debug", "64"] {
                #expect(help.stdout.contains(text))
            }
        }
    }

    // MARK: Encryption (--key-file)

    @Test func setThenGetWithAKeyFileRoundTripsTheValueThroughAnEncryptedFile() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root)
            let json = #"{"token": "s3cr3t-value", "n": 1.50}"#
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", "api", json], in: root)
            #expect(set.status == 0)

            let file = store.appendingPathComponent("api")
            let stored = try #require(FileManager.default.contents(atPath: file.path))
            #expect(stored.starts(with: Array("WLSE".utf8)))
            #expect(stored.range(of: Data("s3cr3t-value".utf8)) == nil)
            #expect(mode(of: file) == 0o600)

            let get = try await ToolRun.run(["--dir", store.path, "--key-file", keyFile.path, "get", "api"], in: root)
            #expect(get.status == 0)
            #expect(get.stdout == "{\n  \"token\": \"s3cr3t-value\",\n  \"n\": 1.50\n}\n")

            // Without the key, the file is not JSON; with it, list and verify find it good.
            #expect(try await ToolRun.run(["--dir", store.path, "get", "api"], in: root).status == 1)
            let list = try await ToolRun.run(["--dir", store.path, "--key-file", keyFile.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(list.stdout.split(separator: "\n").contains { $0.hasPrefix("api ") && $0.hasSuffix("  encrypted") })
        }
    }

    @Test func aValueTheLibraryEncryptedIsReadByTheTool() async throws {
        struct Credentials: Codable, Equatable {
            var user: String
            var scopes: [String]
        }
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("store")
            let (keyFile, key) = try makeKeyFile(in: root)
            do {
                let storage = WLStorage(
                    key: "credentials", defaultValue: Credentials(user: "", scopes: []), flushInterval: nil,
                    store: WLStorageEncryptedStore(.directory(directory), key: key))
                storage.wrappedValue = Credentials(user: "ada", scopes: ["read", "write"])
                storage.flush()
                #expect(storage.lastError == nil)
            }
            let get = try await ToolRun.run(
                ["--dir", directory.path, "--key-file", keyFile.path, "get", "credentials"], in: root)
            #expect(get.status == 0)
            let printed = try JSONDecoder().decode(Credentials.self, from: Data(get.stdout.utf8))
            #expect(printed == Credentials(user: "ada", scopes: ["read", "write"]))
        }
    }

    @Test func verifyWithAKeyFilePassesOnGoodFilesAndNamesAFileWithOneFlippedBit() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root)
            for (key, json) in [("count", "3"), ("profile", #"{"name":"Ada"}"#), ("nothing", "null")] {
                let set = try await ToolRun.run(
                    ["--dir", store.path, "--key-file", keyFile.path, "set", key, json], in: root)
                #expect(set.status == 0)
            }
            let verify = ["--dir", store.path, "--key-file", keyFile.path, "verify"]
            let good = try await ToolRun.run(verify, in: root)
            #expect(good.status == 0)
            #expect(good.stdout.contains("3 key files checked"))
            #expect(good.stdout.contains("no problems"))

            let file = store.appendingPathComponent("profile")
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: file.path)))
            bytes[bytes.count - 20] ^= 0x01  // in the ciphertext
            try Data(bytes).write(to: file)
            let bad = try await ToolRun.run(verify, in: root)
            #expect(bad.status == 1)
            #expect(bad.stdout.contains("bad: profile: does not open with the key"))
            #expect(!bad.stdout.contains("bad: count"))
            #expect(bad.stdout.contains("1 problem"))
            #expect(!bad.stdout.contains("Ada"))

            // A plain JSON file among encrypted ones is flagged too.
            try Data("42".utf8).write(to: store.appendingPathComponent("plain"))
            let plain = try await ToolRun.run(verify, in: root)
            #expect(plain.status == 1)
            #expect(plain.stdout.contains("bad: plain: not encrypted"))
        }
    }

    @Test func aKeyFileThatOthersCanReadIsRefused() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root, mode: 0o644)
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", "k", "1"], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.contains("the key file can be read by"))
            #expect(set.stderr.contains("chmod 600"))
            #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("k").path))

            let missing = try await ToolRun.run(
                ["--dir", store.path, "--key-file", root.appendingPathComponent("absent.key").path, "list"], in: root)
            #expect(missing.status == 1)
            #expect(missing.stderr.contains("the key file cannot be read"))
        }
    }

    @Test func getWithTheWrongKeyFailsNamingTheFileWithoutPrintingTheValue() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (rightKey, _) = try makeKeyFile(in: root, named: "right.key")
            let (wrongKey, _) = try makeKeyFile(in: root, named: "wrong.key")
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", rightKey.path, "set", "api", #""hunter2-secret""#], in: root)
            #expect(set.status == 0)

            let get = try await ToolRun.run(["--dir", store.path, "--key-file", wrongKey.path, "get", "api"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains("does not open"))
            #expect(get.stderr.contains(store.appendingPathComponent("api").path))
            #expect(!get.stderr.contains("hunter2"))
        }
    }

    @Test(arguments: ["api", "with space"])
    func setAndRmWithoutAKeyFileLeaveASealedValueAndSayWhichKeySealedIt(key storageKey: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, key) = try makeKeyFile(in: root)
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", storageKey, #""s3cr3t""#], in: root)
            #expect(set.status == 0)
            let path = try await ToolRun.run(["--dir", store.path, "path", storageKey], in: root).stdout
                .trimmingCharacters(in: .newlines)
            let sealed = try #require(FileManager.default.contents(atPath: path))

            for command in [["set", storageKey, #""plain""#], ["rm", storageKey]] {
                let run = try await ToolRun.run(["--dir", store.path] + command, in: root)
                #expect(run.status == 1, "\(command)")
                #expect(run.stderr.contains("sealed with key \(fingerprint(of: key))"), "\(run.stderr)")
                #expect(run.stderr.contains("pass --key-file"), "\(run.stderr)")
                #expect(run.stderr.contains(path), "\(run.stderr)")
                #expect(FileManager.default.contents(atPath: path) == sealed, "\(command)")
            }

            // With the key file, the value is replaced and removed as before.
            let replace = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", storageKey, "2"], in: root)
            #expect(replace.status == 0)
            let remove = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "rm", storageKey], in: root)
            #expect(remove.status == 0)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func getListAndVerifyWithoutAKeyFileSayAValueIsSealedAndWithWhichKey() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, key) = try makeKeyFile(in: root)
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", "api", #""s3cr3t""#], in: root)
            #expect(set.status == 0)
            let sealed = "sealed with key \(fingerprint(of: key)); pass --key-file"

            let get = try await ToolRun.run(["--dir", store.path, "get", "api"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains(sealed), "\(get.stderr)")
            #expect(!get.stderr.contains("JSON"), "\(get.stderr)")

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(list.stdout.split(separator: "\n").contains { $0.hasPrefix("api ") && $0.hasSuffix("  " + sealed) })
            #expect(!list.stdout.contains("invalid JSON"))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("bad: api: \(sealed)"), "\(verify.stdout)")
            #expect(!verify.stdout.contains("JSON"), "\(verify.stdout)")
        }
    }

    @Test func aWrongKeyFileNamesTheKeyThatSealedTheValueAndTheKeyGiven() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (rightFile, right) = try makeKeyFile(in: root, named: "right.key")
            let (wrongFile, wrong) = try makeKeyFile(in: root, named: "wrong.key")
            for key in ["api", "with space"] {
                let set = try await ToolRun.run(
                    ["--dir", store.path, "--key-file", rightFile.path, "set", key, "1"], in: root)
                #expect(set.status == 0)
            }
            let both = [fingerprint(of: right), fingerprint(of: wrong)]
            for command in [["get", "api"], ["set", "api", "2"], ["get", "with space"], ["set", "with space", "2"]] {
                let run = try await ToolRun.run(
                    ["--dir", store.path, "--key-file", wrongFile.path] + command, in: root)
                #expect(run.status == 1, "\(command)")
                #expect(run.stderr.contains("sealed with key \(both[0])"), "\(command): \(run.stderr)")
                #expect(run.stderr.contains("the key file has key \(both[1])"), "\(command): \(run.stderr)")
            }
            let verify = try await ToolRun.run(["--dir", store.path, "--key-file", wrongFile.path, "verify"], in: root)
            #expect(verify.status == 1)
            let bad = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("bad: ") }
            #expect(bad.count == 2, "\(verify.stdout)")
            for line in bad {
                #expect(line.contains("sealed with key \(both[0])") && line.contains("has key \(both[1])"), "\(line)")
            }
        }
    }

    @Test func aKeyFileOwnedByAnotherUserIsRefusedByTheTool() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root)
            #expect(chown(keyFile.path, 65534, 65534) == 0)
            for command in [["set", "k", "1"], ["list"]] {
                let run = try await ToolRun.run(["--dir", store.path, "--key-file", keyFile.path] + command, in: root)
                #expect(run.status == 1, "\(command)")
                #expect(run.stderr.contains("the key file is owned by uid 65534"), "\(run.stderr)")
                #expect(run.stderr.contains(keyFile.path))
            }
            #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("k").path))
        }
    }
}

/// The fingerprint of `key` in hexadecimal, as its description shows it.
private func fingerprint(of key: WLStorageEncryptionKey) -> String {
    String(key.description.dropFirst("WLStorageEncryptionKey(fingerprint: ".count).dropLast())
}

/// A key file holding the base64 text of a new random key, with `mode`, and the key.
private func makeKeyFile(
    in root: URL, named name: String = "storage.key", mode: mode_t = 0o600
) throws -> (URL, WLStorageEncryptionKey) {
    let key = try WLStorageEncryptionKey.random()
    let url = root.appendingPathComponent(name)
    try Data((key.base64EncodedSecret + "\n").utf8).write(to: url)
    guard chmod(url.path, mode) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return (url, key)
}

// MARK: - Tables

extension WLStorageCommandTests {
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

    /// Options and environment without `--dir`, and where the file of key `k` must end up, relative to the test's
    /// directory. `ROOT` in the environment stands for the test's directory.
    struct DefaultDirectoryCase: Sendable, CustomTestStringConvertible {
        var options: [String]
        var environment: [String: String]
        var expectedFile: String

        var testDescription: String { "\(options) \(environment.keys.sorted())" }

        static let all = [
            DefaultDirectoryCase(
                options: ["--program", "myapp"], environment: ["XDG_DATA_HOME": "ROOT/data", "HOME": "ROOT/home"],
                expectedFile: "data/myapp/.wlstorage/k"),
            DefaultDirectoryCase(
                options: ["--program", "myapp", "--debug"], environment: ["XDG_DATA_HOME": "ROOT/data"],
                expectedFile: "data/myapp/.wlstorage_debug/k"),
            DefaultDirectoryCase(
                options: ["--program", "myapp"], environment: ["HOME": "ROOT/home"],
                expectedFile: "home/.local/share/myapp/.wlstorage/k"),
            DefaultDirectoryCase(
                options: ["--program", "myapp"],
                environment: ["WLSTORAGE_DIRECTORY": "ROOT/override", "XDG_DATA_HOME": "ROOT/data"],
                expectedFile: "override/k"),
            DefaultDirectoryCase(
                options: [], environment: ["WLSTORAGE_DIRECTORY": "ROOT/override"], expectedFile: "override/k"),
        ]
    }
}

// MARK: - Running the tool

/// What a finished run of the tool printed, and how it ended.
private struct ToolResult {
    /// The exit status, or the signal's number when `signaled`.
    var status: Int32
    /// Whether the process was ended by a signal.
    var signaled: Bool
    var stdout: String
    var stderr: String
}

/// One run of the `wlstorage` binary that `swift test` builds beside the test bundle.
///
/// Standard output and error go to files in the test's directory (never to pipes, so a chatty child cannot
/// block), and the child's environment is the test's own without the variables that select a default
/// directory, plus `environment`. Nothing is forwarded to the test's output: a failing test shows both files with its
/// issues (the `.capturingOutput` trait).
private final class ToolRun {
    static let tool = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        .deletingLastPathComponent().appendingPathComponent("wlstorage")

    private let process = Process()
    private let outputURL: URL
    private let errorURL: URL

    init(
        _ arguments: [String], executable: URL = ToolRun.tool, environment: [String: String] = [:], in root: URL
    ) throws {
        let id = UUID().uuidString
        outputURL = root.appendingPathComponent("\(id).out")
        errorURL = root.appendingPathComponent("\(id).err")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)

        var childEnvironment = ProcessInfo.processInfo.environment
        for name in ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME", "HOME"] { childEnvironment[name] = nil }
        childEnvironment.merge(environment) { $1 }

        process.executableURL = executable
        process.arguments = arguments
        process.environment = childEnvironment
        process.currentDirectoryURL = root
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.run()
        TestRecord.current?.addOutput { [outputURL, errorURL] in
            describeOutput(
                command: [executable.lastPathComponent] + arguments, standardOutput: Self.contents(of: outputURL),
                standardError: Self.contents(of: errorURL))
        }
    }

    /// The text of the file at `url`, empty when there is none.
    private static func contents(of url: URL) -> String {
        String(decoding: FileManager.default.contents(atPath: url.path) ?? Data(), as: UTF8.self)
    }

    /// Runs the tool to its end.
    static func run(
        _ arguments: [String], executable: URL = ToolRun.tool, environment: [String: String] = [:], in root: URL
    ) async throws -> ToolResult {
        let tool = try ToolRun(arguments, executable: executable, environment: environment, in: root)
        return await tool.finish()
    }

    /// What the tool has printed on standard output so far.
    var printed: String {
        Self.contents(of: outputURL)
    }

    /// Waits until the lines printed so far are `lines`. Returns `false` after `timeout` seconds.
    func waitForLines(_ lines: [String], timeout: Double = 60) async -> Bool {
        let expected = lines.map { $0 + "\n" }.joined()
        return await eventually(timeout: timeout) { () async in printed == expected }
    }

    /// Waits until what the tool has printed on standard error satisfies `condition`. Returns `false` after
    /// `timeout` seconds.
    func waitForError(timeout: Double = 60, _ condition: (String) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { () async in
            condition(Self.contents(of: errorURL))
        }
    }

    func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the tool to end, killing it after `timeout` seconds, and returns what it printed.
    func finish(timeout: Double = 60) async -> ToolResult {
        let ended = await eventually(timeout: timeout) { () async in process.end != nil }
        if !ended {
            send(SIGKILL)
            Issue.record("wlstorage \(process.arguments ?? []) did not end within \(timeout) s; killed it")
            _ = await eventually(timeout: 30) { () async in process.end != nil }
        }
        let end = process.end
        return ToolResult(
            status: end?.status ?? -1,
            signaled: end?.signaled ?? true,
            stdout: printed,
            stderr: Self.contents(of: errorURL))
    }
}

/// Creates a file whose name is `name`, bytes that need not be UTF-8, in `directory`, which is created if needed.
private func createFile(named name: [UInt8], in directory: URL, contents: [UInt8]) throws {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let path = Array(directory.path.utf8) + [UInt8(ascii: "/")] + name + [0]
    let fd = path.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) {
            open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        }
    }
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    let written = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == contents.count else { throw POSIXError(.EIO) }
}

/// An exclusive `flock` on a file, as a writer holds on its temporary file while it is at work.
private final class WriterLock {
    private var descriptor: CInt

    init(on url: URL) throws {
        descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard flock(descriptor, LOCK_EX) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    func release() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
    }

    deinit { release() }
}

/// `wlstorage --suite NAME`: the directory the library's `.suite(NAME)` names, as a user runs the tool.
@Suite(.capturingOutput)
struct ToolSuiteTests {
    /// A plain name is its own folder; a name that is not, and a plain name in the form of a hashed folder, are
    /// `suite-` and their SHA-256.
    @Test(arguments: ["com.example.shared", "my suite/with a slash", "suite-" + String(repeating: "ab", count: 32)])
    func theSuiteOptionUsesTheLibrarysFolderUnderARelativeSuitesDirectory(name: String) async throws {
        try await withTemporaryDirectory { root in
            // Relative, as a user types it: taken from the current directory, the test's directory here.
            let environment = ["WLSTORAGE_SUITES_DIRECTORY": "suites"]
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent("suites"), withIntermediateDirectories: true)
            let library = try #require(
                StorageLocation.suiteDirectory(
                    name, environment: ["WLSTORAGE_SUITES_DIRECTORY": root.appendingPathComponent("suites").path]))
            let folder =
                FileName.isPlain(name) && !name.hasPrefix("suite-") ? name : "suite-" + SHA256.hexDigest(of: name)!
            #expect(library.lastPathComponent == folder)

            let set = try await ToolRun.run(["--suite", name, "set", "k", "7"], environment: environment, in: root)
            #expect(set.status == 0, "\(set.stderr)")
            #expect(FileManager.default.contents(atPath: library.appendingPathComponent("k").path) == Data("7".utf8))
            let path = try await ToolRun.run(["--suite", name, "path", "k"], environment: environment, in: root)
            #expect(path.stdout == library.appendingPathComponent("k").path + "\n")

            // What the tool wrote, a storage of the suite reads.
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: .directory(library))
            #expect(storage.wrappedValue == 7)
        }
    }

    @Test func withoutASuitesDirectoryTheSuiteIsUnderTheDataHome() async throws {
        try await withTemporaryDirectory { root in
            let suites = root.appendingPathComponent("data/wlstorage/suites")
            try FileManager.default.createDirectory(at: suites, withIntermediateDirectories: true)
            let run = try await ToolRun.run(
                ["--suite", "tools", "set", "k", "\"x\""], environment: ["XDG_DATA_HOME": root.path + "/data"],
                in: root)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(FileManager.default.contents(atPath: suites.path + "/tools/k") == Data("\"x\"".utf8))
        }
    }

    @Test(arguments: [
        ["--suite", "s", "--dir", "d", "list"], ["--suite", "s", "--program", "p", "list"],
        ["--suite", "s", "--debug", "list"], ["--suite", "s", "--postgres", "host=x", "list"], ["--suite"],
    ])
    func theSuiteOptionWithAnotherDirectoryIsAUsageError(arguments: [String]) async throws {
        try await withTemporaryDirectory { root in
            let run = try await ToolRun.run(arguments, in: root)
            #expect(run.status == 64)
            #expect(run.stderr.contains("--suite") || run.stderr.contains("needs a value"), "\(run.stderr)")
        }
    }
}
