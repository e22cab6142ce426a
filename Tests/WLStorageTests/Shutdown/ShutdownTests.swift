import Foundation
import Testing

@testable import WLStorage
@testable import WLStorageFiles

/// Shutdown on a real child process: signals, exit, return from main, and kill -9.
@Suite(.capturingOutput) struct ShutdownTests {
    /// Starts the test child in `mode`, waits for it to be ready, and returns it.
    private func startChild(
        _ mode: String, in directory: URL, value: String = "flushed", blockSignals: Bool = false
    ) throws -> ChildProcess {
        let child = try ChildProcess(
            "WLStorageTestChild", [mode, directory.path, "key", value],
            environment: blockSignals ? ["WLSTORAGE_TEST_BLOCK_SIGNALS": "1"] : [:])
        try #require(child.waitFor("ready"), "the child did not get ready")
        return child
    }

    @Test(arguments: [SIGTERM, SIGINT, SIGHUP])
    func aTerminatingSignalFlushesThenEndsTheProgramByThatSignal(signal: Int32) throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("wait", in: directory)
            #expect(stored(String.self, key: "key", in: directory) == "", "the value was written before the signal")
            child.send(signal)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .uncaughtSignal)
            #expect(end.status == signal)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }

    @Test(arguments: [SIGTERM, SIGINT, SIGHUP])
    func aTerminatingSignalFlushesAStorageWithoutAFlushIntervalThenEndsTheProgramByThatSignal(signal: Int32) throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("wait-nil-interval", in: directory)
            #expect(stored(String.self, key: "key", in: directory) == "", "the value was written before the signal")
            child.send(signal)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .uncaughtSignal)
            #expect(end.status == signal)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }

    @Test(arguments: [SIGTERM, SIGINT, SIGHUP])
    func aProgramThatStartedWithTheSignalBlockedIsFlushedAndEndedToo(signal: Int32) throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("wait", in: directory, blockSignals: true)
            child.send(signal)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .uncaughtSignal)
            #expect(end.status == signal)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }

    @Test func aSignalRightAfterTheFirstStorageIsCreatedIsFlushedNotLost() throws {
        // Dispatch registers signal sources a moment after they are resumed; a signal in between must not be lost.
        for _ in 0..<10 {
            try withTemporaryDirectory { directory in
                let child = try startChild("early", in: directory)
                let end = try #require(child.waitForExit())
                #expect(end.reason == .uncaughtSignal)
                #expect(end.status == SIGTERM)
                #expect(stored(String.self, key: "key", in: directory) == "flushed")
            }
        }
    }

    @Test func theReferenceSyntaxWorksInAClassAndAStructWithTheDefaultDirectory() throws {
        try withTemporaryDirectory { directory in
            for run in 1...2 {
                let child = try ChildProcess(
                    "WLStorageTestChild", ["reference", "/unused", "unused", "Ada"],
                    environment: ["WLSTORAGE_DIRECTORY": directory.path])
                let end = try #require(child.waitForExit())
                #expect(end.reason == .exit)
                #expect(end.status == 0)
                // The second run reads what the first one stored at exit.
                #expect(child.lines.first == (run == 1 ? "before: nil dark" : "before: Ada light"))
            }
            #expect(stored(String?.self, key: "first_name", in: directory) == "Ada")
            #expect(stored(String.self, key: "theme", in: directory) == "light")
        }
    }

    @Test func exitFlushes() throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("exit", in: directory)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .exit)
            #expect(end.status == 0)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }

    @Test func aGlobalStorageIsFlushedWhenMainReturns() throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("global", in: directory)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .exit)
            #expect(end.status == 0)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }

    @Test func aSignalTheProgramIgnoresIsLeftAlone() throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("ignored", in: directory)
            child.send(SIGTERM)
            // Nothing is to happen; give a flush that should not come a generous moment to show up.
            usleep(300_000)
            #expect(child.process.end == nil)
            #expect(stored(String.self, key: "key", in: directory) == "")
            child.send(SIGKILL)
            #expect(child.waitForExit()?.status == SIGKILL)
        }
    }

    @Test func aProgramThatOptsOutFlushesWithFlushAllFromItsOwnHandler() throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("opt-out", in: directory)
            child.send(SIGTERM)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .exit)
            #expect(end.status == 0)
            #expect(child.lines.contains("flushed by the program"))
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }

    @Test func aSecondSignalDuringTheFlushNeitherHangsNorTearsTheFile() throws {
        try withTemporaryDirectory { directory in
            let child = try startChild("slow", in: directory)
            child.send(SIGTERM)
            // The slow backer prints "writing" once for the first change, and again for the shutdown flush.
            #expect(child.waitFor("writing", count: 2))
            child.send(SIGINT)
            child.send(SIGTERM)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .uncaughtSignal)
            #expect(end.status == SIGTERM)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }

    @Test func killNineAtAnyMomentLeavesACompleteFileAndNoTemporaryFileAfterReopening() throws {
        try withTemporaryDirectory { directory in
            let kills = 100
            var torn = 0
            var missing = 0
            var temporaryFilesSeen = 0
            var generator = SystemRandomNumberGenerator()
            for _ in 0..<kills {
                let child = try startChild("rewrite", in: directory)
                usleep(UInt32.random(in: 0..<60_000, using: &generator))
                child.send(SIGKILL)
                _ = child.waitForExit()
                temporaryFilesSeen += entries(of: directory).filter(StorageDirectory.isTemporary).count
                guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent("key").path)
                else {
                    missing += 1
                    continue
                }
                let value = try? JSONDecoder().decode(String.self, from: data)
                let parts = value?.split(separator: "-", omittingEmptySubsequences: false) ?? []
                // "n-n-…-n-" splits into 100,000 equal parts and a final empty one.
                if parts.count != 100_001 || parts.last != "" || Set(parts.dropLast()).count != 1 { torn += 1 }
            }
            let opener = try ChildProcess("WLStorageTestChild", ["open", directory.path, "key"])
            _ = opener.waitForExit()
            let left = entries(of: directory).filter(StorageDirectory.isTemporary)
            let summary: Comment =
                "\(kills) kills, \(torn) torn, \(missing) missing, \(temporaryFilesSeen) temporary files left by kills"
            #expect(torn == 0, summary)
            #expect(missing == 0, summary)
            #expect(left.isEmpty, summary)
            #expect(entries(of: directory) == ["key"])
        }
    }
}
