// A failed or interrupted system call never loses a value: the write stays pending and is retried, and whatever is not
// a file at the name is left alone.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct ReleasedStorageRetryTests {
    /// "The value stays pending in memory and is retried with the backoff (at least 100 ms, doubling up to 30 s),
    /// whatever the storage's flush interval."
    @Test(arguments: [3_600, 1_000_000_000])
    func aReleasedStorageWithALongIntervalRetriesItsFailedWriteWithinSeconds(interval: Int) throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let failing = TakenFlag(false)
            FaultInjection.install(
                { call, name in call == .rename && name == "k" && failing.isSet ? .fail(ENOSPC) : nil },
                forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            do {
                let stored = fileStorage("k", in: directory, default: "", flushInterval: interval)
                stored.flush()
                try #require(FileManager.default.fileExists(atPath: path + "/k"), "the default was not saved")
                failing.set(true)
                stored.wrappedValue = "pending"
            }
            // The deinit write failed; space comes back.
            failing.set(false)
            #expect(
                eventually(timeout: 30) { stored(String.self, key: "k", in: directory) == "pending" },
                "not written within 10 s; the file holds \(stored(String.self, key: "k", in: directory) ?? "nil")")
        }
    }
}

@Suite(.capturingOutput) struct InterruptedCallTests {
    /// A signal can interrupt any call on a FUSE or NFS mount (EINTR). "Short writes and EINTR are retried": one
    /// interruption of any call must not make a flush fail.
    @Test(arguments: SystemCall.allCases)
    func oneInterruptionOfAnyCallDoesNotFailAFlush(call interrupted: SystemCall) throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let text = fileStorage("k", in: directory, default: "", flushInterval: nil)
            text.flush()
            let armed = TakenFlag(true)
            FaultInjection.install(
                { call, _ in call == interrupted && armed.take() ? .fail(EINTR) : nil }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            text.wrappedValue = "value"
            text.flush()
            #expect(!text.hasPendingChanges, "\(text.lastError.map(String.init(describing:)) ?? "")")
            #expect(stored(String.self, key: "k", in: directory) == "value")
        }
    }
}

@Suite(.capturingOutput) struct FaultSweepTests {
    /// Fails the `occurrence`-th call of `kind` (and, with `twice`, the next one too) in the directory at `path`.
    private static func plan(_ kind: SystemCall, _ occurrence: Int, _ errno: Int32, twice: Bool)
        -> FaultInjection.Plan
    {
        let seen = Atomic<Int>(0)
        return { call, _ in
            guard call == kind else { return nil }
            let count = seen.add(1, ordering: .relaxed).newValue
            return count == occurrence || (twice && count == occurrence + 1) ? .fail(errno) : nil
        }
    }

    /// A value is stored. A storage is opened with another default while one call (or two in a row) fails; then a
    /// change is set and flushed once the disk is healthy. The default never reaches the file, and the file and the
    /// storage agree at the end: the change, or (when the first read failed) the stored value that wins over it.
    @Test(arguments: [EIO, ENOSPC, EMFILE])
    func faultsWhileAStoredValueIsOpenedNeverLetTheDefaultThrough(errno: Int32) throws {
        var findings: [String] = []
        for twice in [false, true] {
            for kind in SystemCall.allCases {
                for occurrence in 1...8 {
                    try withTemporaryDirectory { directory in
                        let path = directory.standardizedFileURL.path
                        try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"stored\"")
                        FaultInjection.install(Self.plan(kind, occurrence, errno, twice: twice), forDirectory: path)
                        let opened = fileStorage("k", in: directory, default: "default", flushInterval: nil)
                        opened.flush()
                        FaultInjection.remove(forDirectory: path)
                        let label = "\(kind) #\(occurrence)\(twice ? "+1" : "") errno \(errno)"
                        if stored(String.self, key: "k", in: directory) != "stored" {
                            findings.append(
                                "\(label): after opening, the file holds \(stored(String.self, key: "k", in: directory) ?? "nil")"
                            )
                        }
                        opened.wrappedValue = opened.wrappedValue + "+1"
                        opened.flush()
                        opened.flush()
                        let file = stored(String.self, key: "k", in: directory)
                        if file != opened.wrappedValue || !["stored", "stored+1"].contains(file ?? "") {
                            findings.append(
                                "\(label): the file holds \(file ?? "nil"), the storage \(opened.wrappedValue)")
                        }
                    }
                }
            }
        }
        #expect(findings.isEmpty, "\(findings.count) findings: \(findings.prefix(10))")
    }

    /// Nothing is stored. A storage is opened, set and released while one call (or two in a row) fails; the disk
    /// then becomes healthy. The value set is written (by the deinit, or by the retries of the released storage).
    @Test(arguments: [EIO, ENOSPC, EMFILE])
    func faultsWhileANewValueIsSetAndReleasedNeverLoseIt(errno: Int32) throws {
        var findings: [String] = []
        for twice in [false, true] {
            for kind in SystemCall.allCases {
                for occurrence in 1...8 {
                    try withTemporaryDirectory { directory in
                        let path = directory.standardizedFileURL.path
                        FaultInjection.install(Self.plan(kind, occurrence, errno, twice: twice), forDirectory: path)
                        do {
                            let opened = fileStorage("k", in: directory, default: "default", flushInterval: nil)
                            opened.wrappedValue = "set"
                        }
                        FaultInjection.remove(forDirectory: path)
                        let label = "\(kind) #\(occurrence)\(twice ? "+1" : "") errno \(errno)"
                        if !eventually(timeout: 30, { stored(String.self, key: "k", in: directory) == "set" }) {
                            findings.append(
                                "\(label): the file holds \(stored(String.self, key: "k", in: directory) ?? "nil")")
                        }
                    }
                }
            }
        }
        #expect(findings.isEmpty, "\(findings.count) findings: \(findings.prefix(10))")
    }
}

@Suite(.capturingOutput) struct NotAFileAtTheNameTests {
    /// Another program puts a symlink (to a file holding valid JSON), a directory or a FIFO at the file's name. The
    /// storage neither follows nor reads it, never replaces it, and keeps its value pending.
    @Test(arguments: ["symlink", "directory", "fifo"])
    func somethingOtherThanAFileAtTheNameIsNeitherFollowedNorReplaced(kind: String) throws {
        try withTemporaryDirectory { directory in
            let watched = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            watched.wrappedValue = "mine"
            watched.flush()
            let file = directory.appendingPathComponent("k")
            let elsewhere = directory.appendingPathComponent("elsewhere.json")
            try Data("\"followed\"".utf8).write(to: elsewhere)
            let temporary = directory.appendingPathComponent("replacement")
            switch kind {
            case "symlink": try #require(symlink(elsewhere.path, temporary.path) == 0)
            case "directory": try makeDirectory(temporary.path)
            default: try #require(mkfifo(temporary.path, 0o600) == 0)
            }
            if kind == "directory" {
                try #require(unlink(file.path) == 0)
            }
            try #require(rename(temporary.path, file.path) == 0)
            usleep(300_000)  // to show that nothing is adopted
            #expect(watched.wrappedValue != "followed")
            watched.wrappedValue = "after"
            watched.flush()
            var status = stat()
            #expect(lstat(file.path, &status) == 0 && (status.st_mode & S_IFMT) != S_IFREG, "it was replaced")
            #expect(watched.hasPendingChanges)
            #expect(watched.lastError?.code == .notARegularFile)
            #expect(storedString(atPath: elsewhere.path) == "followed")
        }
    }

    /// Two spellings of one directory (a symlink) with two value types: the second is refused as a type mismatch
    /// and never writes the file (that holds). But its first flush "writes" to the discarding backer, which counts
    /// as a successful write: `lastError` goes back to `nil` and `hasPendingChanges` to `false`, so a program that
    /// checks them after `flush()` believes its value is on disk.
    @Test func aTypeMismatchStaysReportedAndPendingAfterAFlush() throws {
        try withTemporaryDirectory { root in
            let real = root.path + "/real"
            try makeDirectory(real)
            try #require(symlink(real, root.path + "/link") == 0)
            let text = storage("k", atPath: real, default: "text")
            text.flush()
            let number = fileStorage("k", in: URL(fileURLWithPath: root.path + "/link"), default: 7, flushInterval: nil)
            number.wrappedValue = 8
            try #require(number.lastError?.code == .typeMismatch)
            number.flush()
            #expect(number.lastError?.code == .typeMismatch, "the mismatch is forgotten after a flush")
            #expect(number.hasPendingChanges, "a value that is never written is not pending")
            #expect(storedString(atPath: real + "/k") == "text")
        }
    }
}
