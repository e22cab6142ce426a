// Programs of two shapes of a key's value at work on one directory at once, as real processes: the rewrites of the
// newer programs never replace a set of the older one.
import Foundation
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct RewritesAmongOtherProgramsTests {
    private struct Stamped: Decodable {
        var stamp: Int
    }

    /// An older program stores sets in a tight loop while newer programs start two at a time, each reading the older
    /// shape and rewriting it in the newer one, and each removing abandoned temporary files as it starts. The key
    /// ends holding the older program's last set (or its rewrite), neither program reports an error, and no
    /// temporary or moved-aside file is left. A third program, of the older shape, that only follows the key,
    /// ends on that last set: the exchanges that give way may show it a rewrite for a moment, never for good.
    @Test func newerProgramsOpeningAKeyAnOlderOneSetsInALoopLeaveItsLastSet() throws {
        try withTemporaryDirectory { directory in
            let stop = directory.appendingPathComponent("stop")
            let store = directory.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            let older = try ChildProcess(
                "WLStorageTestChild", ["older-sets", store.path, "panel", stop.path],
                environment: ["SWIFT_BACKTRACE": "enable=no"])
            let watchStop = directory.appendingPathComponent("stop-watching")
            let watcher = try ChildProcess(
                "WLStorageTestChild", ["older-watch", store.path, "panel", watchStop.path],
                environment: ["SWIFT_BACKTRACE": "enable=no"])
            #expect(watcher.waitFor("ready"), "the watching program did not start")
            #expect(older.waitFor("ready"), "the older program did not start")
            for _ in 0..<40 {
                let newer = try (0..<2).map { _ in
                    try ChildProcess(
                        "WLStorageTestChild", ["newer-open", store.path, "panel"],
                        environment: ["SWIFT_BACKTRACE": "enable=no"])
                }
                for program in newer {
                    let end = try #require(program.process.waitForEnd(), "a newer program did not end")
                    #expect(end == ProcessEnd(status: 0, signaled: false))
                    let said = program.lines.last ?? ""
                    #expect(said.hasPrefix("opened ") && said.hasSuffix(" none"), "\(said) \(program.printedErrors)")
                }
            }
            #expect(FileManager.default.createFile(atPath: stop.path, contents: Data()))
            let end = try #require(older.process.waitForEnd(), "the older program did not end")
            #expect(end == ProcessEnd(status: 0, signaled: false))
            let last = try #require(older.lines.last?.split(separator: " "), "\(older.lines)")
            try #require(last.count == 3 && last[0] == "last", "\(last)")
            #expect(last[2] == "none", "the older program's last error: \(last[2])")
            let stored = try JSONDecoder().decode(
                Stamped.self, from: Data(contentsOf: store.appendingPathComponent("panel")))
            #expect("\(stored.stamp)" == last[1], "the key holds the set of stamp \(stored.stamp), not the last one")
            #expect(
                watcher.waitFor("stamp \(last[1])"),
                "the watching program did not see the last set: \(watcher.lines.suffix(3))")
            #expect(FileManager.default.createFile(atPath: watchStop.path, contents: Data()))
            #expect(try #require(watcher.process.waitForEnd()) == ProcessEnd(status: 0, signaled: false))
            #expect(
                watcher.lines.last == "final \(last[1]) none",
                "the watching program ended on \(watcher.lines.suffix(3))")
            let left = try FileManager.default.contentsOfDirectory(atPath: store.path).filter {
                $0 != "panel" && !StorageDirectory.isKeptOriginal($0)
            }
            #expect(left.isEmpty, "files left beside the key's and its original's: \(left)")
        }
    }
}
