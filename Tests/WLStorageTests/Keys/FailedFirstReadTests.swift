// A failed first read, then a set: the value derived from the default never replaces the stored one.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

private struct Counter: Codable, Sendable, Equatable {
    var name: String
    var count: Int
}

@Suite(.capturingOutput) struct FailedFirstReadTests {
    @Test(arguments: [nil, 1] as [Int?])
    func aValueDerivedFromTheDefaultAfterAFailedReadNeverReplacesTheStoredValue(flushInterval: Int?) {
        let original = Counter(name: "stored", count: 41)
        let backer = RecordingBacker<Counter>(stored: original, failingReads: 1)
        do {
            let storage = WLStorage(
                defaultValueClosure: { Counter(name: "default", count: 0) }, flushInterval: flushInterval,
                backer: backer)
            #expect(storage.lastError != nil, "the first read did not fail")
            storage.wrappedValue.count += 1
            storage.flush()
        }
        // Either the write was refused, or the storage read the stored value again before changing it.
        #expect(
            backer.stored?.name == "stored", "the stored value was replaced by \(String(describing: backer.stored))")
        #expect(backer.writes.allSatisfy { $0.name != "default" }, "written: \(backer.writes)")
    }

    @Test func aFileThatCouldNotBeReadAtFirstIsNotReplacedByAValueDerivedFromTheDefault() throws {
        // Root ignores mode bits, so as root the child drops to the user nobody before it opens the storage.
        let unprivileged: [String: String] = getuid() == 0 ? ["WLSTORAGE_TEST_UID": "65534"] : [:]
        try withTemporaryDirectory { outer in
            let directory = outer.appendingPathComponent("store", isDirectory: true)
            let file = directory.appendingPathComponent("key")
            let marker = outer.appendingPathComponent("go")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            #expect(chmod(outer.path, 0o755) == 0)
            #expect(chmod(directory.path, 0o777) == 0)
            try Data("\"stored\"".utf8).write(to: file)
            #expect(chmod(file.path, 0o000) == 0)

            let child = try ChildProcess(
                "WLStorageTestChild", ["read-fail-then-set", directory.path, "key", marker.path],
                environment: unprivileged)
            defer { if child.process.end == nil { child.send(SIGKILL) } }
            let opened = eventually(timeout: 60) {
                child.lines.contains { $0.hasPrefix("opened") } || child.process.end != nil
            }
            try #require(opened && child.process.end == nil, "the child did not open the storage: \(child.lines)")
            try #require(
                child.lines.contains("opened readFailed default"), "the first read did not fail: \(child.lines)")
            #expect(chmod(file.path, 0o644) == 0)
            #expect(FileManager.default.createFile(atPath: marker.path, contents: nil))
            let end = try #require(child.waitForExit())
            #expect(end.status == 0)
            let final = stored(String.self, key: "key", in: directory)
            #expect(final == "stored" || final == "stored+1", "the file now holds \(final ?? "nil")")
        }
    }
}
