import Foundation
import Testing

/// The demo program, run as the README tells a new user to run it: twice, then with `--wait` and a signal, and with a
/// directory it cannot use.
///
/// The tests are async and wait without blocking a thread: a run of the demo takes seconds, and the test runner's pool
/// has as many threads as the machine has cores.
@Suite(.capturingOutput) struct DemoTests {
    /// The variables that choose the demo's default directory, unset so that only the test's choice counts.
    private static let directoryVariables = ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME", "HOME"]

    /// Starts the demo with its default directory set to `directory` through `WLSTORAGE_DIRECTORY`.
    private static func demo(_ arguments: [String] = [], directory: String) throws -> ChildProcess {
        try ChildProcess(
            "WLStorageDemo", arguments,
            environment: ["WLSTORAGE_DIRECTORY": directory, "SWIFT_BACKTRACE": "enable=no"],
            unsetting: directoryVariables)
    }

    @Test func theLaunchCountGoesUpAndEachWaitingRunLeavesAChangePendingUntilTheSignal() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("demo")
            let lastSeen = directory.appendingPathComponent("last-seen")

            let first = try Self.demo(directory: directory.path)
            let end = try #require(await first.exited(timeout: 300), "the demo did not end")
            #expect(end.reason == .exit && end.status == 0)
            #expect(first.lines.first == "WLStorage demo — files in \(directory.path)")
            #expect(first.lines.contains("1. This demo has run 1 time(s). Run it again and the count goes up."))
            #expect(first.printedErrors.isEmpty)

            // Both waiting runs must show a change pending: the first creates last-seen, the second finds it.
            for (run, signal) in [(2, SIGTERM), (3, SIGINT)] {
                let demo = try Self.demo(["--wait"], directory: directory.path)
                defer { if demo.process.end == nil { demo.send(SIGKILL) } }
                let waiting = await waitUntil(timeout: 300) {
                    demo.lines.contains { $0.hasPrefix("   cat ") } || demo.process.end != nil
                }
                try #require(waiting && demo.process.end == nil, "run \(run): the demo did not wait")
                #expect(demo.lines.contains("1. This demo has run \(run) time(s). Run it again and the count goes up."))
                let step = stepSix(demo.lines)
                try #require(step.count == 5, "run \(run): no step 6 of five lines")
                let onDisk = String(step[1].dropFirst("   on disk:    ".count))
                let inMemory = String(step[2].dropFirst("   in memory:  ".count))
                #expect(onDisk.hasSuffix(#": waiting for a signal""#), "run \(run): \(step[1])")
                #expect(inMemory.hasSuffix(#": written on the way out""#), "run \(run): \(step[2])")
                #expect(step[4] == "   cat \(lastSeen.path)")
                // What the demo says is on disk is on disk: the change is pending, until the signal writes it.
                #expect(contents(of: "last-seen", in: directory).map { String(decoding: $0, as: UTF8.self) } == onDisk)

                demo.send(signal)
                let end = try #require(await demo.exited(), "run \(run): the demo did not end on the signal")
                #expect(end.reason == .uncaughtSignal && end.status == signal, "run \(run)")
                #expect(
                    contents(of: "last-seen", in: directory).map { String(decoding: $0, as: UTF8.self) } == inMemory)
                #expect(demo.printedErrors.isEmpty)

                // The shutdown article shows this very output, with its own time and directory.
                let shown = Self.asDocumented(step, directory: directory)
                let transcript =
                    (shown + ["^C", "$ cat ~/.local/share/WLStorageDemo/.wlstorage_debug/last-seen"]
                    + Self.asDocumented([inMemory], directory: directory)).joined(separator: "\n")
                for document in ["Docs/WLStorage.docc/ShutdownAndSignals.md"] {
                    let text = try String(
                        contentsOf: packageDirectory.appendingPathComponent(document), encoding: .utf8)
                    #expect(text.contains(transcript), "\(document) does not show what the demo prints:\n\(transcript)")
                }
            }
        }
    }

    /// A directory the demo cannot create (a name longer than the file system allows, in the test's own folder), and
    /// one under a regular file: an error message and status 1, not a crash ("Fatal error: Error raised at top level"
    /// and SIGILL).
    @Test(arguments: ["ROOT/LONG/demo", "FILE/demo"])
    func aDirectoryItCannotUseIsReportedWithStatusOne(path: String) async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent("file")
            try Data().write(to: file)
            let directory = path.replacingOccurrences(of: "FILE", with: file.path)
                .replacingOccurrences(of: "ROOT", with: root.path)
                .replacingOccurrences(of: "LONG", with: String(repeating: "x", count: 300))
            let demo = try Self.demo(directory: directory)
            let end = try #require(await demo.exited(), "the demo did not end")
            #expect(end.reason == .exit && end.status == 1)
            #expect(demo.printedErrors.hasPrefix("WLStorageDemo: WLStorage directoryUnavailable: "))
            #expect(demo.printedErrors.contains("set WLSTORAGE_DIRECTORY to use another directory"))
            #expect(!demo.printed.contains("1. This demo has run"))
        }
    }

    @Test func noDirectoryAtAllIsReportedWithStatusOne() async throws {
        let demo = try ChildProcess("WLStorageDemo", [], unsetting: Self.directoryVariables)
        let end = try #require(await demo.exited(), "the demo did not end")
        #expect(end.reason == .exit && end.status == 1)
        #expect(
            demo.printedErrors
                == "WLStorageDemo: no storage directory: set WLSTORAGE_DIRECTORY, XDG_DATA_HOME or HOME\n")
    }

    /// The five lines of the demo's step 6, from "6. " to the `cat` command.
    private func stepSix(_ lines: [String]) -> [String] {
        Array(lines.drop { !$0.hasPrefix("6. ") }.prefix(5))
    }

    /// `lines` as the documents show them: their time, and the default directory of `swift run WLStorageDemo`.
    private static func asDocumented(_ lines: [String], directory: URL) -> [String] {
        lines.map { line in
            line.replacing(#/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/#, with: "2026-06-01T09:30:00Z")
                .replacingOccurrences(of: directory.path, with: "~/.local/share/WLStorageDemo/.wlstorage_debug")
        }
    }
}
