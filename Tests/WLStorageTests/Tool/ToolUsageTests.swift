import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Usage errors and help.
@Suite(.capturingOutput) struct ToolUsageTests {
    @Test(arguments: [
        [], ["bogus"], ["--dir"], ["--frob", "list"], ["--debug=yes", "--dir", "DIR", "list"],
        ["--dir", "DIR", "get"], ["--dir", "DIR", "set", "k"], ["--dir", "DIR", "rm", "k", "extra"],
        ["--dir", "DIR", "list", "--bogus"], ["--dir", "DIR", "get", "k", "--count", "2"],
        ["--dir", "DIR", "watch", "k", "--count", "0"], ["--dir", "DIR", "watch", "k", "--count"],
        ["--dir", "DIR", "--program", "app", "list"], ["help", "nope"], ["get", "k"], ["list", "--dir", "DIR"],
        ["--dir", "DIR", "set", "k", "--string"], ["--dir", "DIR", "set", "k", "v", "--string", "x"],
        ["--dir", "DIR", "get", "k", "--string", "x"],
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

    @Test(arguments: [["--help"], ["help"], ["-h"]])
    func theToolsHelpLeadsWithUsageTheCommandsAndFiveExamplesWithin25Lines(arguments: [String]) async throws {
        try await withTemporaryDirectory { root in
            let help = try await ToolRun.run(arguments, in: root)
            #expect(help.status == 0)
            let lines = help.stdout.split(separator: "\n", omittingEmptySubsequences: false).prefix(25).map(String.init)
            #expect(lines.contains { $0.hasPrefix("USAGE: wlstorage ") })
            let commands = try #require(lines.firstIndex(of: "COMMANDS:"))
            let all = ["get", "set", "rm", "path", "hash", "list", "verify", "watch", "help"]
            for (offset, command) in all.enumerated() {
                // One line each, in order, right under the heading.
                #expect(lines.dropFirst(commands + 1 + offset).first?.hasPrefix("  \(command) ") == true, "\(command)")
            }
            let examples = try #require(lines.firstIndex(of: "EXAMPLES:"))
            #expect(lines[(examples + 1)...].prefix { $0.hasPrefix("  wlstorage ") }.count == 5)
            #expect(lines.contains { $0.contains("'wlstorage help naming'") })
            // The rules of file names are a topic of their own.
            #expect(!lines.joined().contains("SHA-256"))
            #expect(!help.stdout.contains("NAME~"))
        }
    }

    @Test func helpNamingSaysHowKeysNameFilesAndWhereProgramsAndSuitesKeepThem() async throws {
        try await withTemporaryDirectory { root in
            let naming = try await ToolRun.run(["help", "naming"], in: root)
            #expect(naming.status == 0)
            #expect(naming.stderr.isEmpty)
            for text in [
                "[A-Za-z0-9._-]", "SHA-256", "(hashed)", "NAME~", ".xchg", "program-<SHA-256 of NAME>",
                ".wlstorage_debug",
                "--debug", "WLSTORAGE_SUITES_DIRECTORY", "suite-<SHA-256 of NAME>",
            ] {
                #expect(naming.stdout.contains(text), "\(text)")
            }
        }
    }

    /// The examples of the help, run as a reader types them, in a directory of their own, with myapp's folders in
    /// place. The watch example is stopped after its first value.
    @Test func everyExampleOfTheToolsHelpRuns() async throws {
        try await withTemporaryDirectory { root in
            let help = try await ToolRun.run(["--help"], in: root)
            let lines = help.stdout.split(separator: "\n").map(String.init)
            let examples = try #require(lines.firstIndex(of: "EXAMPLES:"))
            let commands = lines[(examples + 1)...].prefix { $0.hasPrefix("  wlstorage ") }.map { line in
                // The command, without the comment after it.
                String(line.dropFirst(2).components(separatedBy: "   ").first ?? "")
            }
            #expect(commands.count == 5)
            let data = root.appendingPathComponent("xdg")
            for folder in ["myapp/.wlstorage", "myapp/.wlstorage_debug"] {
                try FileManager.default.createDirectory(
                    at: data.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
            try Data("3".utf8).write(to: data.appendingPathComponent("myapp/.wlstorage_debug/cursor"))
            for command in commands {
                let line = command.contains(" watch ") ? command + " --count 1" : command
                let run = try await ToolRun.run(
                    ["-c", line], executable: URL(fileURLWithPath: "/bin/bash"),
                    environment: ["PATH": ToolRun.tool.deletingLastPathComponent().path, "XDG_DATA_HOME": data.path],
                    in: root)
                #expect(run.status == 0, "\(line): \(run.stderr)")
            }
            let name = try #require(FileManager.default.contents(atPath: root.appendingPathComponent("data/name").path))
            #expect(String(decoding: name, as: UTF8.self) == #""Ada""#)
        }
    }
}
