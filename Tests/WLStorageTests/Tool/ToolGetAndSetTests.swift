import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `wlstorage get` and `set`: values stored and printed as JSON, and input refused without writing.
@Suite(.capturingOutput) struct ToolGetAndSetTests {
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

    @Test(arguments: ["1e400", "-1e400", #"{"a":[1,-1e400]}"#])
    func aNumberTheLibraryCannotDecodeIsRefusedWithTheReasonAndNothingIsWritten(json: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)

            let set = try await ToolRun.run(["--dir", store.path, "set", "k", json], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.contains("not valid JSON: Number "))
            #expect(set.stderr.contains(" is not representable in Swift"))
            #expect(FileManager.default.contents(atPath: store.appendingPathComponent("k").path) == Data("1".utf8))
            #expect(entries(of: store) == ["k"])
        }
    }

    @Test func whyTheValueIsNotJSONIsSaidWithTheOffsetOfTheByte() async throws {
        try await withTemporaryDirectory { root in
            let set = try await ToolRun.run(["--dir", root.path, "set", "k", #"{"a": [1, 2}"#], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.hasPrefix("wlstorage: the value is not valid JSON: Invalid value around character 11\n"))
        }
    }

    @Test(arguments: [
        "Ada", "it's \"quoted\"", #"back\slash"#, "line\nbreak\ttab\r", "\u{1}\u{1f}", "", "--x", "ünï 🔑",
    ])
    func setWithStringStoresTheTextAsAJSONString(text: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let set = try await ToolRun.run(["--dir", store.path, "set", "name", "--string", text], in: root)
            #expect(set.status == 0, "\(set.stderr)")
            let stored = try #require(FileManager.default.contents(atPath: store.appendingPathComponent("name").path))
            #expect(try JSONDecoder().decode(String.self, from: stored) == text)

            let get = try await ToolRun.run(["--dir", store.path, "get", "name"], in: root)
            #expect(get.status == 0)
            #expect(try JSONDecoder().decode(String.self, from: Data(get.stdout.utf8)) == text)
        }
    }

    @Test(arguments: [
        ["set", "--string", "Ada", "name"], ["set", "name", "--string=Ada"], ["set", "--string=Ada", "--", "name"],
    ])
    func setWithStringTakesTheOptionBeforeOrAfterTheKey(command: [String]) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let set = try await ToolRun.run(["--dir", store.path] + command, in: root)
            #expect(set.status == 0)
            #expect(
                FileManager.default.contents(atPath: store.appendingPathComponent("name").path) == Data(#""Ada""#.utf8))
        }
    }

    /// The command suggested is run as a reader would paste it into a shell, and stores the text as a string.
    @Test(arguments: ["hello world", "it's", "{nope", "-1x", "a\nb"])
    func aValueThatIsNotJSONIsRefusedWithTheSetStringCommandToType(value: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let key = value.hasPrefix("-") ? "-k" : "k"
            let set = try await ToolRun.run(["--dir", store.path, "set", key, value], in: root)
            #expect(set.status == 1)
            #expect(!FileManager.default.fileExists(atPath: store.path))
            let lines = set.stderr.components(separatedBy: "\n")
            #expect(lines.first?.hasPrefix("wlstorage: the value is not valid JSON: ") == true)
            let prompt = "To store it as a JSON string, type: "
            let suggested = try #require(set.stderr.components(separatedBy: prompt).dropFirst().first)
            #expect(suggested.hasPrefix("wlstorage --dir \(store.path) set "))

            let run = try await ToolRun.run(
                ["-c", String(suggested.dropLast())], executable: URL(fileURLWithPath: "/bin/bash"),
                environment: ["PATH": ToolRun.tool.deletingLastPathComponent().path], in: root)
            #expect(run.status == 0, "\(suggested): \(run.stderr)")
            let stored = try #require(FileManager.default.contents(atPath: store.appendingPathComponent(key).path))
            #expect(try JSONDecoder().decode(String.self, from: stored) == value)
        }
    }

    @Test func getWithSeveralKeysPrintsALineForEachAndSaysWhichHaveNoValue() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(
                try await ToolRun.run(["--dir", store.path, "set", "a/b", #"{"x": [1, 2]}"#], in: root).status == 0)
            #expect(try await ToolRun.run(["--dir", store.path, "set", "count", "3"], in: root).status == 0)
            let get = try await ToolRun.run(["--dir", store.path, "get", "count", "absent", "a/b"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout == "count: 3\na/b: {\"x\":[1,2]}\n")
            #expect(
                get.stderr
                    == "wlstorage: no value stored for 'absent': \(store.appendingPathComponent("absent").path)\n")

            let all = try await ToolRun.run(["--dir", store.path, "get", "count", "a/b"], in: root)
            #expect(all.status == 0)
            #expect(all.stderr.isEmpty)
        }
    }

    @Test func getListAndVerifyJudgeAFileByWhatTheLibraryCanDecode() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            try Data(#"{"v": 1e400}"#.utf8).write(to: store.appendingPathComponent("tiny"))

            let get = try await ToolRun.run(["--dir", store.path, "get", "tiny"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains("does not hold JSON (Number 1e400 is not representable in Swift)"))

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.stdout.split(separator: "\n").last?.hasSuffix("invalid JSON") == true)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("bad: tiny: does not hold JSON: Number 1e400 is not representable in Swift"))
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
}
