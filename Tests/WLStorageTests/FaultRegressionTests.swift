// Regression tests for faults found in review. Each test asserts the behaviour the design promises (DESIGN.md),
// so it fails, or its child process crashes, on the code these tests were written against, and passes once the
// fault is fixed. A fault that crashes a process is always observed in a child, never in the test runner.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

// MARK: - Helpers

/// Runs the test child in `mode` to its end and returns it with how it ended.
private func runChild(
    _ mode: String, in directory: URL, key: String = "key", value: String = "flushed",
    environment: [String: String] = [:], timeout: Double = 60
) throws -> (child: ChildProcess, reason: Process.TerminationReason, status: Int32) {
    // A crash report takes seconds to print and says nothing the fatal error line does not.
    let child = try ChildProcess(
        "WLStorageTestChild", [mode, directory.path, key, value],
        environment: environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 })
    let end = try #require(child.waitForExit(timeout: timeout), "the child did not end")
    return (child, end.reason, end.status)
}

/// A flag and a number that a test shares with a thread of its own.
private final class Shared: Sendable {
    let flag = Atomic<Bool>(false)
    let number = Atomic<Int>(0)
}

/// The modification time of `url`, to the nanosecond.
private func modificationTime(of url: URL) throws -> timespec {
    var status = stat()
    try #require(lstat(url.path, &status) == 0)
    return status.st_mtim
}

/// Whether something, of any kind, stands at `url` (a symlink is not followed).
private func exists(_ url: URL) -> Bool {
    var status = stat()
    return lstat(url.path, &status) == 0
}

/// Counts the values a subscription delivered.
private final class Delivered<T: Sendable>: Sendable {
    private let values = Lock<[T]>([])
    func append(_ value: T) { values.withLock { $0.append(value) } }
    var all: [T] { values.withLock { $0 } }
}

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

/// A value whose decoding runs a hook, once: a way to act exactly between a storage's first read and what follows.
private struct HookedText: Codable, Sendable, Equatable {
    var text: String

    static let hook = Lock<(@Sendable () -> Void)?>(nil)

    init(_ text: String) {
        self.text = text
    }

    init(from decoder: any Decoder) throws {
        text = try decoder.singleValueContainer().decode(String.self)
        let hook = Self.hook.withLock { hook in
            defer { hook = nil }
            return hook
        }
        hook?()
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}

private struct Counter: Codable, Sendable, Equatable {
    var name: String
    var count: Int
}

// MARK: - 1. A subscription that holds the last reference to its storage

/// Ending a subscription that holds the last reference to a storage (through a model object that captured itself in
/// the handler) releases the storage, whose deinit flushes. The release must not happen under the cell's lock.
/// (`subscription-cancel-in-handler` and `values-task` hold on today: a delivery being run keeps its handler alive,
/// and a stream's termination handler is called outside the stream's storage; they guard the rewrite.)
@Suite(.capturingOutput) struct LastReferenceHeldBySubscriptionTests {
    @Test(arguments: ["subscription-cancel", "subscription-drop", "subscription-cancel-in-handler", "values-task"])
    func endingTheSubscriptionThatHoldsTheLastReferenceFlushesAndDoesNotCrash(mode: String) throws {
        try withTemporaryDirectory { directory in
            let run = try runChild(mode, in: directory)
            #expect(run.reason == .exit, "the child crashed: \(run.reason) \(run.status)")
            #expect(run.status == 0)
            #expect(run.child.lines.contains("done"))
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }
}

// MARK: - 2. A default nobody set beats a stored value

@Suite(.capturingOutput) struct DefaultNeverBeatsAStoredValueTests {
    @Test func aStorageWhoseDefaultIsUnwrittenAdoptsAnOutsideWriteAndNeverWritesTheDefaultOverIt() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            do {
                let storage = fileStorage("k", in: directory, default: "default", flushInterval: nil)
                try #require(!exists(file), "the default was written at init")
                try replaceFromOutside(file, with: "\"outside\"")
                let adopted = eventually(timeout: 10) { storage.wrappedValue == "outside" }
                #expect(adopted, "the storage kept \(storage.wrappedValue)")
                storage.flush()
                #expect(stored(String.self, key: "k", in: directory) == "outside")
            }
            // After deinit too.
            #expect(stored(String.self, key: "k", in: directory) == "outside")
        }
    }

    @Test func aProgramThatOnlyOpenedTheStorageDoesNotReplaceAnotherProgramsValueAtExit() throws {
        try withTemporaryDirectory { outer in
            let directory = outer.appendingPathComponent("store", isDirectory: true)
            let marker = outer.appendingPathComponent("go")
            let opener = try ChildProcess("WLStorageTestChild", ["default-wait", directory.path, "key", marker.path])
            defer { if opener.process.end == nil { opener.send(SIGKILL) } }
            try #require(opener.waitFor("ready"))
            let setter = try runChild("set", in: directory, value: "set by the other program")
            try #require(setter.status == 0)
            try #require(stored(String.self, key: "key", in: directory) == "set by the other program")
            #expect(FileManager.default.createFile(atPath: marker.path, contents: nil))
            let end = try #require(opener.waitForExit())
            #expect(end.status == 0)
            #expect(stored(String.self, key: "key", in: directory) == "set by the other program")
        }
    }

    @Test func twoProgramsStartingTogetherOnOneKeyKeepTheValueOneOfThemSet() throws {
        var lost: [String] = []
        for round in 0..<20 {
            try withTemporaryDirectory { directory in
                let setter = try ChildProcess("WLStorageTestChild", ["set", directory.path, "key", "set \(round)"])
                let opener = try ChildProcess("WLStorageTestChild", ["default-exit", directory.path, "key"])
                let setterEnd = try #require(setter.waitForExit())
                let openerEnd = try #require(opener.waitForExit())
                try #require(setterEnd.status == 0 && openerEnd.status == 0)
                let final = stored(String.self, key: "key", in: directory)
                if final != "set \(round)" { lost.append("round \(round): \(final ?? "nil")") }
            }
        }
        #expect(lost.isEmpty, "the set value was replaced in \(lost.count) of 20 rounds: \(lost)")
    }

    @Test(arguments: [nil, 1] as [Int?])
    func aCustomBackerIsNeverWrittenForADefaultNobodySet(flushInterval: Int?) {
        let backer = RecordingBacker<String>()
        do {
            let storage = WLStorage(defaultValueClosure: { "default" }, flushInterval: flushInterval, backer: backer)
            #expect(storage.wrappedValue == "default")
        }
        #expect(backer.writes == [])
    }
}

// MARK: - 3. Two spellings of one directory

@Suite(.capturingOutput) struct OneDirectoryUnderTwoSpellingsTests {
    enum Spelling: String, CaseIterable, Sendable {
        case symlink, dotDot
    }

    @Test(arguments: Spelling.allCases)
    func twoSpellingsOfOneDirectoryShareOneValue(spelling: Spelling) throws {
        try withTemporaryDirectory { outer in
            let real = outer.appendingPathComponent("real", isDirectory: true)
            try FileManager.default.createDirectory(
                at: real.appendingPathComponent("sub"), withIntermediateDirectories: true)
            let other: URL
            switch spelling {
            case .symlink:
                other = outer.appendingPathComponent("alias", isDirectory: true)
                try FileManager.default.createSymbolicLink(at: other, withDestinationURL: real)
            case .dotDot:
                other = URL(fileURLWithPath: real.path + "/sub/..", isDirectory: true)
            }
            do {
                let first = fileStorage("k", in: real, default: "default", flushInterval: nil)
                let second = fileStorage("k", in: other, default: "default", flushInterval: nil)
                first.wrappedValue = "set through the first"
                #expect(second.wrappedValue == "set through the first")
                second.wrappedValue = "set through the second"
                #expect(first.wrappedValue == "set through the second")
                // Released in the order that writes a stale value last if the two are not one.
                _ = consume second
                _ = consume first
            }
            #expect(stored(String.self, key: "k", in: real) == "set through the second")
        }
    }

    @Test func aStorageOpenedThroughASymlinkFollowsItWhenItIsRetargeted() throws {
        try withTemporaryDirectory { outer in
            let a = outer.appendingPathComponent("a", isDirectory: true)
            let b = outer.appendingPathComponent("b", isDirectory: true)
            let link = outer.appendingPathComponent("link", isDirectory: true)
            try FileManager.default.createDirectory(at: a, withIntermediateDirectories: false)
            try FileManager.default.createDirectory(at: b, withIntermediateDirectories: false)
            try Data("\"in a\"".utf8).write(to: a.appendingPathComponent("k"))
            try Data("\"in b\"".utf8).write(to: b.appendingPathComponent("k"))
            #expect(symlink("a", link.path) == 0)

            let storage = fileStorage("k", in: link, default: "default", flushInterval: nil)
            try #require(storage.wrappedValue == "in a")

            // `ln -sfn b link`: a new symlink renamed over the old one.
            let newLink = outer.appendingPathComponent("link.new")
            #expect(symlink("b", newLink.path) == 0)
            #expect(rename(newLink.path, link.path) == 0)

            try replaceFromOutside(link.appendingPathComponent("k"), with: "\"written through the link\"")
            let seen = eventually(timeout: 10) { storage.wrappedValue == "written through the link" }
            #expect(seen, "the storage still has \(storage.wrappedValue)")
        }
    }
}

// MARK: - 4. Signals after flushesOnSignals is switched off and on

@Suite(.capturingOutput) struct SignalsAfterToggleTests {
    @Test func switchingFlushesOnSignalsOffAndOnAgainStillFlushesOnSIGTERM() throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess("WLStorageTestChild", ["signals-toggle", directory.path, "key", "flushed"])
            defer { if child.process.end == nil { child.send(SIGKILL) } }
            try #require(child.waitFor("ready"))
            #expect(stored(String.self, key: "key", in: directory) == "", "the value was written before the signal")
            child.send(SIGTERM)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .uncaughtSignal)
            #expect(end.status == SIGTERM)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }
}

// MARK: - 5. A failed first read, then a set

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

// MARK: - 6. A change between the first read and the directory watch

@Suite(.capturingOutput) struct ChangeBeforeTheWatchTests {
    @Test func aFileReplacedRightAfterTheFirstReadIsPickedUp() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            try Data("\"old\"".utf8).write(to: file)
            // Runs inside the first read, after the file's bytes were read and before the storage watches the
            // directory: another program replaces the file at that moment.
            HookedText.hook.withLock { hook in
                hook = { try? replaceFromOutside(file, with: "\"new\"") }
            }
            let storage = fileStorage("k", in: directory, default: HookedText("default"), flushInterval: nil)
            try #require(HookedText.hook.withLock { $0 == nil }, "the hook did not run")
            try #require(stored(String.self, key: "k", in: directory) == "new")
            let seen = eventually(timeout: 10) { storage.wrappedValue == HookedText("new") }
            #expect(seen, "the storage still has \(storage.wrappedValue.text)")
        }
    }

    @Test func aStorageOpenedWhileAnotherProgramRewritesTheFileEndsWithItsLastValue() throws {
        // Stress: a writer thread replaces the file as fast as it can until the storage is open, so its last write
        // sometimes lands between the first read and the watch.
        var missed: [String] = []
        for round in 0..<50 {
            try withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("k")
                try Data("0".utf8).write(to: file)
                let shared = Shared()  // flag: the storage is open; number: the last value written
                let done = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    var value = 0
                    while !shared.flag.load(ordering: .sequentiallyConsistent) {
                        value += 1
                        if (try? replaceFromOutside(file, with: "\(value)")) != nil {
                            shared.number.store(value, ordering: .sequentiallyConsistent)
                        }
                    }
                    done.signal()
                }
                let storage = fileStorage("k", in: directory, default: -1, flushInterval: nil)
                shared.flag.store(true, ordering: .sequentiallyConsistent)
                done.wait()
                let final = shared.number.load(ordering: .sequentiallyConsistent)
                if !eventually(timeout: 2, { storage.wrappedValue == final }) {
                    missed.append("round \(round): file \(final), storage \(storage.wrappedValue)")
                }
            }
            if !missed.isEmpty { break }
        }
        #expect(missed.isEmpty, "\(missed)")
    }
}

// MARK: - 7. Watches of released storages

@Suite(.capturingOutput) struct WatchLeakTests {
    @Test func releasingTheStoragesOfTwoHundredDirectoriesReleasesTheirWatches() throws {
        try withTemporaryDirectory { directory in
            let run = try runChild("watch-leak", in: directory, value: "keep")
            try #require(run.status == 0)
            let baseline = try #require(run.child.lines.first { $0.hasPrefix("baseline ") })
            let after = try #require(run.child.lines.first { $0.hasPrefix("after ") })
            #expect(after.dropFirst("after ".count) == baseline.dropFirst("baseline ".count), "\(run.child.lines)")
        }
    }

    @Test func removedDirectoriesOfReleasedStoragesAreNotWatchedAgainWhenTheyReturn() throws {
        try withTemporaryDirectory { directory in
            let run = try runChild("watch-leak", in: directory, value: "remove")
            try #require(run.status == 0)
            let baseline = try #require(run.child.lines.first { $0.hasPrefix("baseline ") }).dropFirst(
                "baseline ".count)
            let after = try #require(run.child.lines.first { $0.hasPrefix("after ") }).dropFirst("after ".count)
            let recreated = try #require(run.child.lines.first { $0.hasPrefix("after-recreate ") })
                .dropFirst("after-recreate ".count)
            #expect(after == baseline, "\(run.child.lines)")
            #expect(recreated == baseline, "\(run.child.lines)")
        }
    }
}

// MARK: - 8. A write that fails in deinit

@Suite(.capturingOutput) struct FailedWriteInDeinitTests {
    @Test func aValueWhoseDeinitWriteFailedIsRetriedLater() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<String>(stored: "old")
        do {
            let storage = WLStorage(
                defaultValueClosure: { "default" }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
            storage.wrappedValue = "new"
            backer.failNextWrites(1)
        }
        // (Another test's flushAll, in this same process, may write it first: that is fine too.)
        #expect(backer.failedWrites == 1, "the deinit write did not fail")
        scheduler.advance(by: .seconds(60))
        #expect(backer.writes == ["new"])
    }

    @Test func aValueWhoseDeinitWriteFailedIsWrittenByFlushAll() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<String>(stored: "old")
        do {
            let storage = WLStorage(
                defaultValueClosure: { "default" }, flushInterval: .seconds(1), backer: backer, scheduler: scheduler)
            storage.wrappedValue = "new"
            backer.failNextWrites(1)
        }
        #expect(backer.failedWrites == 1, "the deinit write did not fail")
        WLStorageSystem.flushAll()
        #expect(backer.writes == ["new"])
    }
}

// MARK: - 9. A key that looks like a hash

@Suite(.capturingOutput) struct KeyLikeAHashTests {
    /// `a b` is not a plain key, so its file is named by its SHA-256; `x` is a plain key, named by itself.
    @Test(arguments: ["a b", "x"])
    func aKeyOfSixtyFourHexDigitsIsNotTheKeyWhoseHashItIs(hashedKey: String) throws {
        try withTemporaryDirectory { directory in
            let digest = try #require(SHA256.hexDigest(of: hashedKey))
            let hashed = fileStorage(hashedKey, in: directory, default: "hashed default", flushInterval: nil)
            let lookalike = fileStorage(digest, in: directory, default: "lookalike default", flushInterval: nil)
            #expect(lookalike.key == digest)
            #expect(hashed.key == hashedKey)
            #expect(lookalike.wrappedValue == "lookalike default")
            hashed.wrappedValue = "one"
            lookalike.wrappedValue = "two"
            #expect(hashed.wrappedValue == "one")
            hashed.flush()
            lookalike.flush()
            #expect(entries(of: directory).count == 2, "\(entries(of: directory))")
        }
    }
}

// MARK: - 10. Very long flush intervals

@Suite(.capturingOutput) struct LongFlushIntervalTests {
    @Test func anIntervalOfAlmostUInt64MaxNanosecondsDoesNotWriteEveryChange() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(18_446_744_000), backer: backer, scheduler: scheduler)
        storage.wrappedValue = 1
        scheduler.advance()
        #expect(backer.writes == [1])
        storage.wrappedValue = 2
        scheduler.advance()
        scheduler.advance(by: .seconds(3_600))
        #expect(backer.writes == [1], "the second change was written at once")
        #expect(storage.hasPendingChanges)
    }

    @Test func anIntervalOfIntMaxSecondsStillWritesTheFirstChangeAtOnce() {
        let scheduler = ManualScheduler()
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(
            defaultValueClosure: { 0 }, flushInterval: .seconds(Int.max), backer: backer, scheduler: scheduler)
        storage.wrappedValue = 1
        scheduler.advance()
        #expect(backer.writes == [1], "the first change was not written")
    }
}

// MARK: - 11. Moved-aside names

@Suite(.capturingOutput) struct MovedAsideNamesTests {
    @Test func twoUndecodableFilesInOneSecondAreBothKept() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            for garbage in ["first garbage", "second garbage"] {
                try Data(garbage.utf8).write(to: file)
                let reported = ReportedErrors.errors(under: directory).count
                let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
                // As reported: `lastError` is cleared once the default is saved, which may come first.
                #expect(
                    ReportedErrors.errors(under: directory).dropFirst(reported).contains { $0.code == .decodingFailed })
                _ = storage
            }
            let aside = entries(of: directory).filter { $0.contains("~corrupt-") }
            #expect(aside.count == 2, "\(aside)")
            let contents = Set(
                aside.compactMap { try? String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8) })
            #expect(contents == ["first garbage", "second garbage"])
        }
    }

    /// Fails the first `collisions` moves aside with `EEXIST`, as if a kept file had every name drawn, and with
    /// `fallback` makes `renameat2` unsupported, so that the `linkat` path is taken.
    private static func collide(_ collisions: Int, fallback: Bool = false, in directory: URL) -> Shared {
        let attempts = Shared()
        let path = directory.standardizedFileURL.path
        FaultInjection.install(
            { call, name in
                guard let name, name.contains("~corrupt-") else { return nil }
                if fallback && call == .rename { return .fail(EINVAL) }
                guard call == (fallback ? .link : .rename) else { return nil }
                let attempt = attempts.number.add(1, ordering: .relaxed).newValue
                return attempt <= collisions ? .fail(EEXIST) : nil
            }, forDirectory: path)
        return attempts
    }

    @Test(arguments: [false, true])
    func aNameAlreadyTakenIsNeverReplacedAnotherIsDrawn(fallback: Bool) throws {
        try withTemporaryDirectory { directory in
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let attempts = Self.collide(3, fallback: fallback, in: directory)
            try Data("garbage".utf8).write(to: directory.appendingPathComponent("k"))
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            // Reported; `lastError` may already be `nil` again, once the default is saved in the background.
            #expect(ReportedErrors.errors(under: directory).contains { $0.code == .decodingFailed })
            #expect(attempts.number.load(ordering: .relaxed) == 4)
            let aside = entries(of: directory).filter { $0.contains("~corrupt-") }
            #expect(aside.count == 1)
            #expect(
                aside.first.flatMap { try? String(contentsOfFile: directory.path + "/" + $0, encoding: .utf8) }
                    == "garbage")
            withExtendedLifetime(storage) {}
        }
    }

    @Test func whenEveryNameDrawnIsTakenTheFileStaysWhereItIsAndIsNeverOverwritten() throws {
        try withTemporaryDirectory { directory in
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            _ = Self.collide(.max, in: directory)
            let file = directory.appendingPathComponent("k")
            try Data("garbage".utf8).write(to: file)
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(storage.lastError?.code == .writeFailed)
            storage.wrappedValue = 1
            storage.flush()
            // What is stored is unknown to the storage: its change, based on the default, never replaces the file.
            #expect(try String(contentsOf: file, encoding: .utf8) == "garbage")
            #expect(storage.hasPendingChanges)
        }
    }
}

// MARK: - 12. A huge sparse file

@Suite(.capturingOutput) struct HugeFileTests {
    @Test func aTerabyteSparseFileIsReportedNotACrash() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("key")
            let fd = open(file.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            try #require(fd >= 0)
            try #require(ftruncate(fd, 1 << 40) == 0)
            close(fd)
            let run = try runChild("open-report", in: directory)
            #expect(run.reason == .exit, "the child crashed: \(run.reason) \(run.status)")
            #expect(run.status == 0)
            let reported = run.child.lines.first { $0.hasPrefix("error ") }
            #expect(reported != nil && reported != "error none", "\(run.child.lines)")
            let kept = entries(of: directory).contains { name in
                var status = stat()
                return lstat(directory.appendingPathComponent(name).path, &status) == 0 && status.st_size == 1 << 40
            }
            #expect(kept, "\(entries(of: directory))")
        }
    }

    /// A limit set to `Int.max` would let a sparse file of a terabyte be allocated in full: the limit stops at 1 GiB.
    @Test func theMaximumValueSizeCannotBeSetBeyondOneGibibyte() {
        let before = WLStorageSystem.maximumValueSize
        defer { WLStorageSystem.maximumValueSize = before }
        WLStorageSystem.maximumValueSize = Int.max
        #expect(WLStorageSystem.maximumValueSize == 1 << 30)
        WLStorageSystem.maximumValueSize = (1 << 30) + 1
        #expect(WLStorageSystem.maximumValueSize == 1 << 30)
    }
}

// MARK: - 13. A write in place that keeps size and time

@Suite(.capturingOutput) struct InPlaceWriteKeepingTimeTests {
    @Test func anOutsideWriteInPlaceWithTheSameSizeAndTimeIsNotTakenForTheStoragesOwn() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            let storage = fileStorage("k", in: directory, default: "", flushInterval: nil)
            storage.wrappedValue = "aaaa"
            storage.flush()
            try #require(stored(String.self, key: "k", in: directory) == "aaaa")
            let written = try modificationTime(of: file)

            // The same inode, the same length; the time is put back before the file is closed, so the close
            // (IN_CLOSE_WRITE) is seen only once the file looks untouched.
            let fd = open(file.path, O_WRONLY | O_TRUNC)
            try #require(fd >= 0)
            let bytes = Array("\"bbbb\"".utf8)
            #expect(write(fd, bytes, bytes.count) == bytes.count)
            let omit = (1 << 30) - 2  // UTIME_OMIT, a macro Swift does not import: leave the access time
            var times = [timespec(tv_sec: 0, tv_nsec: omit), written]
            #expect(futimens(fd, &times) == 0)
            close(fd)
            try #require(stored(String.self, key: "k", in: directory) == "bbbb")
            let now = try modificationTime(of: file)
            try #require(now.tv_sec == written.tv_sec && now.tv_nsec == written.tv_nsec)

            storage.cell.checkForExternalChange()
            #expect(storage.wrappedValue == "bbbb")
        }
    }
}

// MARK: - 14. Clean-up of temporary files

@Suite(.capturingOutput) struct CleanUpKeepsOtherFilesTests {
    @Test func filesThatOnlyLookLikeTemporaryFilesSurviveTheFirstStorageOfTheDirectory() throws {
        try withTemporaryDirectory { directory in
            let draft = directory.appendingPathComponent("report~draft.tmp")
            let fifo = directory.appendingPathComponent("x~y.tmp")
            try Data("a user's draft".utf8).write(to: draft)
            #expect(mkfifo(fifo.path, 0o600) == 0)
            let run = try runChild("open", in: directory)
            #expect(run.status == 0)
            #expect(exists(draft), "\(entries(of: directory))")
            #expect(exists(fifo), "\(entries(of: directory))")
        }
    }
}

// MARK: - 17. A file removed under a live storage

@Suite(.capturingOutput) struct FileRemovedUnderALiveStorageTests {
    @Test func aRemovedFileBringsBackTheDefaultAndIsNotWrittenAgain() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            let storage = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            storage.wrappedValue = "v"
            storage.flush()
            try #require(stored(String.self, key: "k", in: directory) == "v")
            let delivered = Delivered<String>()
            let queue = DispatchQueue(label: "test.removed")
            let subscription = storage.onChange(queue: queue) { delivered.append($0) }
            defer { subscription.cancel() }

            try #require(unlink(file.path) == 0)
            let reset = eventually(timeout: 10) { storage.wrappedValue == "default" }
            #expect(reset, "the storage still has \(storage.wrappedValue)")
            let notified = eventually(timeout: 10) { delivered.all.contains("default") }
            #expect(notified, "delivered: \(delivered.all)")
            storage.flush()
            #expect(stored(String.self, key: "k", in: directory) != "v")
        }
    }

    @Test func aLocalChangePendingWhenTheFileIsRemovedIsKeptAndWritten() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            let storage = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            storage.wrappedValue = "v"
            storage.flush()
            storage.wrappedValue = "local"
            let checksBefore = storage.cell.externalChecks
            try #require(unlink(file.path) == 0)
            let looked = eventually { storage.cell.externalChecks > checksBefore }
            #expect(looked)
            #expect(storage.wrappedValue == "local")
            storage.flush()
            #expect(stored(String.self, key: "k", in: directory) == "local")
        }
    }
}

// MARK: - Found by the randomized test: a check asked for during a write that a flush waited for was lost

@Suite(.capturingOutput) struct CheckDuringAWaitedWriteTests {
    @Test func anOutsideChangeSeenWhileAWriteRunsAndAFlushWaitsIsStillAdopted() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("k", in: directory, default: "", flushInterval: 0)
            storage.wrappedValue = "a"
            storage.flush()
            // The next write stops after its rename, at the sync of the directory, until the test lets it go on.
            let stopped = DispatchSemaphore(value: 0)
            let proceed = DispatchSemaphore(value: 0)
            let armed = Shared()
            armed.flag.store(true, ordering: .relaxed)
            let path = directory.standardizedFileURL.path
            FaultInjection.install(
                { call, name in
                    if call == .fsync, name == nil, armed.flag.exchange(false, ordering: .relaxed) {
                        stopped.signal()
                        // Bounded: a failing test must not leave a write stopped, which every later `flushAll()`
                        // of the test process would wait for.
                        _ = proceed.wait(timeout: .now() + 30)
                    }
                    return nil
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }

            storage.wrappedValue = "b"  // written at once, in the background
            try #require(stopped.wait(timeout: .now() + 10) == .success)
            var released = false
            defer { if !released { proceed.signal() } }
            let flushed = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                storage.flush()
                flushed.signal()
            }
            // (Another test's `flushAll()`, in this process, may wait for the write too.)
            try #require(eventually { storage.cell.state.withLock { $0.extras?.waiters.count ?? 0 } >= 1 })
            // Another program writes after the rename: its event asks for a check while the write still runs.
            let checks = storage.cell.externalChecks
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            try #require(eventually { storage.cell.externalChecks > checks })
            released = true
            proceed.signal()
            try #require(flushed.wait(timeout: .now() + 10) == .success)
            #expect(eventually(timeout: 5) { storage.wrappedValue == "outside" }, "still \(storage.wrappedValue)")
        }
    }
}

// MARK: - 16. Parents of a storage directory are synced once per process, whether or not this process made them

@Suite(.capturingOutput) struct ParentSyncTests {
    @Test func everyParentOfAnExistingStorageDirectoryIsSyncedOnFirstUse() throws {
        try withTemporaryDirectory { root in
            // As if a process had been killed between its mkdir and the sync of the parent: the directory exists.
            let directory = root.appendingPathComponent("a/b/c")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.standardizedFileURL.path
            let synced = Lock<Int>(0)
            FaultInjection.install(
                { call, name in
                    if call == .fsync, name == ".." { synced.withLock { $0 += 1 } }
                    return nil
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            let storage = fileStorage("k", in: directory, default: 1, flushInterval: nil)
            #expect(storage.wrappedValue == 1)
            // One sync for each parent of the directory not synced yet in this process (other tests may have synced
            // / and the temporary folder): at least the test's root, a and a/b.
            #expect(synced.withLock { $0 } >= 3)
        }
    }
}

// MARK: - Found by the fault matrix: the monitor looked at a directory under its lock

@Suite(.capturingOutput) struct MonitorLockTests {
    @Test func aDirectoryThatIsSlowToLookAtDoesNotHoldUpTheWatchesOfOthers() throws {
        try withTemporaryDirectory { root in
            let slow = root.appendingPathComponent("slow")
            let other = root.appendingPathComponent("other")
            for directory in [slow, other] {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            }
            let slowPath = slow.standardizedFileURL.path
            let stalled = DispatchSemaphore(value: 0)
            let proceed = DispatchSemaphore(value: 0)
            FaultInjection.install(
                { call, name in
                    if call == .stat, name == nil {
                        stalled.signal()
                        _ = proceed.wait(timeout: .now() + 30)
                    }
                    return nil
                }, forDirectory: slowPath)
            defer { FaultInjection.remove(forDirectory: slowPath) }

            let slowDone = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                FileMonitor.shared.watch(StorageDirectory(path: slowPath))
                slowDone.signal()
            }
            try #require(stalled.wait(timeout: .now() + 10) == .success)
            // While the slow directory is being looked at, another directory is watched and let go of.
            let otherDone = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let directory = StorageDirectory(path: other.standardizedFileURL.path)
                FileMonitor.shared.watch(directory)
                FileMonitor.shared.unwatch(directory)
                otherDone.signal()
            }
            let served = otherDone.wait(timeout: .now() + 5) == .success
            proceed.signal()
            #expect(served, "another directory waited for the slow one")
            try #require(slowDone.wait(timeout: .now() + 10) == .success)
            if !served { _ = otherDone.wait(timeout: .now() + 10) }
            FileMonitor.shared.unwatch(StorageDirectory(path: slowPath))
        }
    }
}
