// A failed first read, then a set: the value derived from the default never replaces the stored one.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A backer in memory whose first `failingReads` reads throw, after which it reads normally.
private final class FlakyReadBacker<T: Codable & Sendable>: WLStorageBacker, Sendable {
    private struct State {
        var stored: T?
        var writes: [T] = []
        var failingReads: Int
    }

    let key = "flaky"
    private let state: Lock<State>

    init(stored: T?, failingReads: Int) {
        state = Lock(State(stored: stored, failingReads: failingReads))
    }

    func read(defaultValueClosure: () -> T) throws -> T {
        let stored = try state.withLock { state throws -> T? in
            if state.failingReads > 0 {
                state.failingReads -= 1
                throw BackerFailure()
            }
            return state.stored
        }
        return stored ?? defaultValueClosure()
    }

    func write(value: T) throws {
        state.withLock { state in
            state.stored = value
            state.writes.append(value)
        }
    }

    var stored: T? { state.withLock { $0.stored } }
    var writes: [T] { state.withLock { $0.writes } }
}

private struct Counter: Codable, Sendable, Equatable {
    var name: String
    var count: Int
}

@Suite(.capturingOutput) struct FailedFirstReadTests {
    @Test(arguments: [nil, 1] as [Int?])
    func aValueDerivedFromTheDefaultAfterAFailedReadNeverReplacesTheStoredValue(flushInterval: Int?) {
        let original = Counter(name: "stored", count: 41)
        let backer = FlakyReadBacker<Counter>(stored: original, failingReads: 1)
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
