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
}
