// Every error path of the file writer and reader, through the fault-injection seam under `StorageDirectory`: each
// system call of a write, of the save of a default and of the first read is failed in turn, alone, and what the
// storage and the directory hold afterwards is checked against the guarantees (Guarantees.md: Durability, Reading).
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

/// An `errno` value as a test argument, shown by its name.
struct SystemError: Sendable, CustomTestStringConvertible {
    let code: Int32
    var testDescription: String { errnoName(code) }

    static let eio = SystemError(code: EIO)
    static let emfile = SystemError(code: EMFILE)
    static let enospc = SystemError(code: ENOSPC)
}

@Suite(.capturingOutput) struct FaultInjectionTests {
    // MARK: - Writes

    /// What failing one call of a write must do.
    enum Outcome: Sendable {
        /// Nothing visible: the call's result is ignored by design, and the write succeeds.
        case harmless
        /// As ``harmless``, but the temporary name stays behind, as a second link to the new file, until the directory
        /// is next prepared: the failed call was the one that removes it.
        case harmlessLeavingTemporary
        /// The write fails before the file is replaced: the old file is left whole and the value stays pending.
        case failsBeforePlacing(WLStorageError.Code)
        /// The write fails after the file was replaced: the file holds the new value, but the write is not known to
        /// be durable, so it is reported and the value stays pending, to be written again.
        case failsAfterPlacing(WLStorageError.Code)
    }

    /// One way the file writer puts a file in place.
    enum WritePath: String, Sendable, CaseIterable, CustomTestStringConvertible {
        /// A set and a flush of a storage whose file holds an old value: `renameat` over it.
        case replace
        /// The save of a default where no file is: `renameat2` with `RENAME_NOREPLACE`.
        case createDefault
        /// The same where `renameat2` is not supported (`EINVAL`): `linkat`, then `unlinkat` of the temporary name.
        case createDefaultByLink

        var testDescription: String { rawValue }

        /// Every system call of a write that succeeds, in order, and what failing it must do.
        var sequence: [(call: String, outcome: Outcome)] {
            let start: [(String, Outcome)] = [
                ("open(directory)", .failsBeforePlacing(.directoryUnavailable)),
                // The shared lock of the directory only keeps clean-up away from a temporary file being created.
                ("flock(directory)", .harmless),
                ("open(temporary)", .failsBeforePlacing(.writeFailed)),
                // The lock of the temporary file only keeps other processes' clean-up away from it.
                ("flock(temporary)", .harmless),
                ("write(temporary)", .failsBeforePlacing(.writeFailed)),
                // The identity of the version written, and its mode (set with `fchmod` only when a umask took bits).
                ("stat(temporary)", .failsBeforePlacing(.writeFailed)),
                ("fsync(temporary)", .failsBeforePlacing(.writeFailed)),
                // The shared lock of the directory again, held from the close to the rename: it keeps clean-up away
                // from the temporary file once its own lock is gone with the close.
                ("flock(directory)", .harmless),
                // Closed before the rename, so that the close is reported under the temporary name.
                ("close(temporary)", .failsBeforePlacing(.writeFailed)),
            ]
            let end: [(String, Outcome)] = [
                ("fsync(directory)", .failsAfterPlacing(.writeFailed)),
                // The write is complete and durable; the descriptor is released whatever `close` says.
                ("close(directory)", .harmless),
            ]
            switch self {
            case .replace:
                return start + [
                    // The check that nothing but a regular file stands at the name; `renameat` replaces a name, never
                    // what a symlink points to, so a failed check changes nothing.
                    ("stat(file)", .harmless),
                    ("rename(file)", .failsBeforePlacing(.writeFailed)),
                ] + end
            case .createDefault:
                return start + [
                    ("rename(file)", .failsBeforePlacing(.writeFailed))
                ] + end
            case .createDefaultByLink:
                return start + [
                    ("link(file)", .failsBeforePlacing(.writeFailed)),
                    ("unlink(temporary)", .harmlessLeavingTemporary),
                ] + end
            }
        }

        /// Faults injected into every call, uncounted: `renameat2` unsupported for the link path.
        var standing: @Sendable (SystemCall, String?) -> InjectedFault? {
            switch self {
            case .replace, .createDefault:
                return { _, _ in nil }
            case .createDefaultByLink:
                return { call, name in call == .rename && name == FaultInjectionTests.key ? .fail(EINVAL) : nil }
            }
        }

        /// What the file holds before the write, if anything.
        var before: Data? { self == .replace ? FaultInjectionTests.old : nil }

        /// What the file holds after the write.
        var after: Data { self == .replace ? FaultInjectionTests.new : FaultInjectionTests.defaultValue }
    }

    static let key = "key"
    static let old = Data(#""old""#.utf8)
    static let new = Data(#""new""#.utf8)
    static let defaultValue = Data(#""default""#.utf8)

    /// What one write did with one call failed.
    struct WriteRun {
        var injected: RecordedCall?
        var calls: [String]
        var error: WLStorageError?
        var pending: Bool
        /// Whether the cell still has work for its backer (a change, or a default to save).
        var hasWork: Bool
        var file: Data?
        var temporaryFiles: [String]
        /// After the plan is removed and the storage flushed again.
        var retryError: WLStorageError?
        var retryHasWork: Bool
        var retryFile: Data?
        var retryTemporaryFiles: [String]
        /// What the clean-up of the next process to prepare the directory removed.
        var cleanedUp: [String]
    }

    /// Writes through `path` in a fresh directory with the call at `index` failed with `fault` (none with `nil`),
    /// then removes the fault and flushes again.
    static func write(_ path: WritePath, failing index: Int?, with fault: InjectedFault) throws -> WriteRun {
        try withTemporaryDirectory { directory in
            if let before = path.before { try before.write(to: directory.appendingPathComponent(key)) }
            let storage = manualStorage(key, in: directory, default: "default")
            if path == .replace {
                try #require(storage.wrappedValue == "old")
                storage.wrappedValue = "new"
            }
            let plan = FaultPlan(
                directory: directory, fileName: key, failing: index, with: fault, standing: path.standing)
            storage.flush()
            plan.remove()
            var run = WriteRun(
                injected: plan.injected, calls: plan.calls.map(\.description), error: storage.lastError,
                pending: storage.hasPendingChanges, hasWork: storage.cell.state.withLock { $0.hasWork },
                file: contents(of: key, in: directory), temporaryFiles: temporaryFiles(in: directory),
                retryError: nil, retryHasWork: false, retryFile: nil, retryTemporaryFiles: [], cleanedUp: [])
            storage.flush()
            run.retryError = storage.lastError
            run.retryHasWork = storage.cell.state.withLock { $0.hasWork }
            run.retryFile = contents(of: key, in: directory)
            run.retryTemporaryFiles = temporaryFiles(in: directory)
            // A file locked for a moment by another thread's child process, between its spawn and its exec (which
            // closes the descriptors it inherited open), is a writer at work to the clean-up: it is tried again then. A
            // lock that stays (a descriptor of the package left open) still fails the test.
            let cleanUp = StorageDirectory(path: plan.path)
            var cleanedUp = try cleanUp.removeAbandonedTemporaryFiles()
            if cleanedUp.isEmpty, !run.retryTemporaryFiles.isEmpty {
                _ = eventually(timeout: 30) {
                    cleanedUp += (try? cleanUp.removeAbandonedTemporaryFiles()) ?? []
                    return !cleanedUp.isEmpty
                }
            }
            run.cleanedUp = cleanedUp
            return run
        }
    }

    /// The calls a write through `path` makes when nothing fails, checked against the table of the path.
    static func recordedSequence(_ path: WritePath) throws -> [String] {
        let run = try write(path, failing: nil, with: .fail(EIO))
        try #require(run.error == nil, "the write failed with no fault injected: \(String(describing: run.error))")
        let expected = path.sequence.map(\.call)
        try #require(
            run.calls == expected,
            "the \(path) write's system calls are not the ones its table describes; update the table")
        return run.calls
    }

    @Test(arguments: WritePath.allCases, [SystemError.emfile, .eio, .enospc])
    func failingAnyOneCallOfAWriteKeepsTheFileWholeAndTheWorkPending(path: WritePath, fault: SystemError) throws {
        let sequence = try Self.recordedSequence(path)
        for (index, (point, outcome)) in zip(sequence, path.sequence.map(\.outcome)).enumerated() {
            let at: Comment = "\(fault.testDescription) at \(point), call \(index) of the \(path) write"
            let run = try Self.write(path, failing: index, with: .fail(fault.code))
            #expect(run.injected?.description == point, at)
            switch outcome {
            case .harmless, .harmlessLeavingTemporary:
                #expect(run.error == nil, "\(at): \(String(describing: run.error))")
                #expect(!run.hasWork, at)
                #expect(run.file == path.after, at)
            case .failsBeforePlacing(let code), .failsAfterPlacing(let code):
                // A default placed before the failure may be found standing there by the monitor first, and taken as
                // stored: then nothing is left to do, and the error, reported, is no longer the last one.
                var foundInPlace = false
                if case .failsAfterPlacing = outcome, path != .replace, run.error == nil, !run.hasWork {
                    foundInPlace = true
                }
                if !foundInPlace {
                    #expect(run.error?.code == code, "\(at): \(String(describing: run.error))")
                    #expect(run.error?.errno == fault.code, "\(at): \(String(describing: run.error))")
                }
                if path == .replace { #expect(run.pending, "\(at): the change was dropped") }
                if case .failsBeforePlacing = outcome {
                    #expect(run.hasWork, "\(at): the work was dropped")
                    #expect(run.file == path.before, "\(at): the file was changed by a write that failed")
                } else {
                    // A change stays pending whatever the monitor sees. A default placed but not synced may instead
                    // be found standing there by the monitor and taken as stored, which it is.
                    if path == .replace { #expect(run.hasWork, "\(at): the work was dropped") }
                    #expect(run.file == path.after, at)
                }
            }
            if case .harmlessLeavingTemporary = outcome {
                #expect(run.temporaryFiles.count == 1, "\(at): \(run.temporaryFiles)")
                #expect(run.cleanedUp == run.temporaryFiles, "\(at): the next process's clean-up left it")
            } else {
                #expect(run.temporaryFiles.isEmpty, "\(at): \(run.temporaryFiles) left behind")
            }
            // With the fault gone, the next flush does what was left.
            #expect(run.retryFile == path.after, at)
            #expect(!run.retryHasWork, at)
            #expect(run.retryTemporaryFiles == run.temporaryFiles, at)
            // A default found standing is saved as surely as one this flush wrote: nothing is left, so no error is.
            #expect(run.retryError == nil, "\(at): lastError after the retry is \(String(describing: run.retryError))")
        }
    }

    @Test(arguments: WritePath.allCases)
    func anInterruptedCallAnywhereInAWriteIsRetriedAndTheWriteSucceeds(path: WritePath) throws {
        let sequence = try Self.recordedSequence(path)
        for (index, point) in sequence.enumerated() {
            let at: Comment = "EINTR at \(point), call \(index) of the \(path) write"
            let run = try Self.write(path, failing: index, with: .fail(EINTR))
            #expect(run.injected?.description == point, at)
            #expect(run.error == nil, "\(at): \(String(describing: run.error))")
            #expect(!run.hasWork, at)
            #expect(run.file == path.after, at)
            #expect(run.temporaryFiles.isEmpty, "\(at): \(run.temporaryFiles) left behind")
        }
    }

    // MARK: - The first read

    static let storedValue = Data(#""stored""#.utf8)

    /// What a storage opened on a stored file did with one call of its first read failed.
    struct ReadRun {
        var injected: RecordedCall?
        var calls: [RecordedCall]
        var initial: String
        var error: WLStorageError?
        /// Whether a second storage of the same file, opened next, shares the first one's value.
        var sharesCell: Bool
        /// Whether the monitor's events for the file reach the storage: whether the registry finds its cell by the
        /// file, as the monitor does.
        var reachedByEvents: Bool
        /// After a set and a flush with the fault gone.
        var value: String
        var pending: Bool
        var errorAfterFlush: WLStorageError?
        var file: Data?
        var entries: [String]
    }

    static func read(failing index: Int?, with fault: InjectedFault) throws -> ReadRun {
        try withTemporaryDirectory { directory in
            try storedValue.write(to: directory.appendingPathComponent(key))
            let plan = FaultPlan(directory: directory, fileName: key, failing: index, with: fault)
            let storage = manualStorage(key, in: directory, default: "default")
            plan.remove()
            let initial = storage.wrappedValue
            let error = storage.lastError
            let second = manualStorage(key, in: directory, default: "default")
            let sharesCell = second.cell === storage.cell
            let file = CellKey.file(key, in: try StorageDirectory(path: plan.path).identity())
            let reachedByEvents = Runtime.shared.registry.cell(for: file) === storage.cell
            storage.wrappedValue = "changed"
            storage.flush()
            return ReadRun(
                injected: plan.injected, calls: plan.calls, initial: initial, error: error, sharesCell: sharesCell,
                reachedByEvents: reachedByEvents,
                value: storage.wrappedValue, pending: storage.hasPendingChanges, errorAfterFlush: storage.lastError,
                file: contents(of: key, in: directory), entries: entries(of: directory))
        }
    }

    /// The calls a storage's creation makes on a stored file: the preparation of the directory (its creation, the
    /// sync of its parents, the clean-up of temporary files, the monitor's look at it), then the read of the file.
    static func recordedReadSequence() throws -> [RecordedCall] {
        let run = try read(failing: nil, with: .fail(EIO))
        try #require(run.error == nil && run.initial == "stored")
        let names = run.calls.map(\.description)
        try #require(
            names.suffix(4) == ["open(file)", "stat(file)", "read(file)", "close(file)"]
                && run.calls.dropLast(4).allSatisfy { $0.name == nil },
            "the first read's system calls are not the expected ones: \(names)")
        return run.calls
    }

    /// Whether failing `call` must make the storage start from the default: a failure to open, inspect or read the
    /// file. A failure to close it after the whole file was read changes nothing, and every call on the directory is
    /// made again by the read when the preparation before it failed.
    static func leavesTheStoredValueUnknown(_ call: RecordedCall) -> Bool {
        call.target == "file" && [.open, .stat, .read].contains(call.call)
    }

    @Test(arguments: [SystemError.eio, .emfile])
    func failingAnyOneCallOfTheFirstReadNeverLetsTheDefaultOverwriteTheStoredValue(fault: SystemError) throws {
        let sequence = try Self.recordedReadSequence()
        for (index, point) in sequence.enumerated() {
            let at: Comment = "\(fault.testDescription) at \(point), call \(index) of the first read"
            let run = try Self.read(failing: index, with: .fail(fault.code))
            #expect(run.injected == point, at)
            #expect(run.sharesCell, "\(at): a second storage of the same file got a value of its own")
            #expect(run.reachedByEvents, "\(at): other programs' writes of the file never reach the storage")
            if Self.leavesTheStoredValueUnknown(point) {
                #expect(run.initial == "default", at)
                #expect(run.error?.code == .readFailed, "\(at): \(String(describing: run.error))")
                #expect(run.error?.errno == fault.code, "\(at): \(String(describing: run.error))")
                // The set was based on the default: the flush reads the file first, keeps it, and drops the change.
                #expect(run.file == Self.storedValue, "\(at): the stored file was overwritten")
                #expect(run.value == "stored", at)
                #expect(!run.pending, at)
                #expect(
                    run.errorAfterFlush?.code == .changeDiscarded,
                    "\(at): lastError after the flush is \(String(describing: run.errorAfterFlush))")
                #expect(run.errorAfterFlush?.key == Self.key, "\(at): \(String(describing: run.errorAfterFlush))")
            } else {
                #expect(run.initial == "stored", at)
                #expect(run.error == nil, "\(at): \(String(describing: run.error))")
                #expect(run.file == Data(#""changed""#.utf8), at)
                #expect(run.errorAfterFlush == nil, "\(at): \(String(describing: run.errorAfterFlush))")
            }
            #expect(run.entries == [Self.key], "\(at): \(run.entries)")
        }
    }

    @Test func anInterruptedCallAnywhereInTheFirstReadIsRetriedAndTheStoredValueRead() throws {
        let sequence = try Self.recordedReadSequence()
        for (index, point) in sequence.enumerated() {
            let at: Comment = "EINTR at \(point), call \(index) of the first read"
            let run = try Self.read(failing: index, with: .fail(EINTR))
            #expect(run.injected == point, at)
            #expect(run.initial == "stored", at)
            #expect(run.error == nil, "\(at): \(String(describing: run.error))")
            #expect(run.sharesCell, "\(at): a second storage of the same file got a value of its own")
            #expect(run.reachedByEvents, "\(at): other programs' writes of the file never reach the storage")
            #expect(run.file == Data(#""changed""#.utf8), at)
        }
    }

    /// The directory is prepared when the first storage of it is created; when that fails once, the storage's read
    /// prepares it again. The storage must then be the one of its file like any other: found by a second storage of
    /// the file, and told when another program replaces it.
    @Test func aStorageWhoseDirectoryCouldNotBePreparedAtFirstStillSeesOtherProgramsWrites() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent(Self.key)
            try Self.storedValue.write(to: file)
            let sequence = try Self.recordedReadSequence().map(\.description)
            let identityCheck = try #require(sequence.firstIndex(of: "stat(directory)"))
            let plan = FaultPlan(directory: directory, fileName: Self.key, failing: identityCheck, with: .fail(EIO))
            let storage = fileStorage(Self.key, in: directory, default: "default", flushInterval: nil)
            plan.remove()
            try #require(plan.injected?.description == "stat(directory)")
            #expect(storage.wrappedValue == "stored")

            let outside = directory.appendingPathComponent("outside")
            try Data(#""outside""#.utf8).write(to: outside)
            try #require(rename(outside.path, file.path) == 0)
            #expect(
                eventually { storage.wrappedValue == "outside" },
                "the storage never took the value another program stored")
        }
    }

    // MARK: - Stalls

    /// What a stalled write and the test's thread tell each other.
    final class StallProbe: Sendable {
        /// The thread that flushes: the only one whose calls are stalled or held.
        let flusher = Atomic<UInt>(0)
        let stalled = Atomic<Bool>(false)
        let getAndSetDone = Atomic<Bool>(false)
        let flushReturned = Atomic<Bool>(false)
        let proceed = DispatchSemaphore(value: 0)
    }

    /// The write stalls 200 ms at `point`, as on a slow disk, and then stays in flight, its next call held, until the
    /// test's get and set on another thread have returned (or 60 s have passed). A get or a set that waited for the
    /// write would return only after the flush did.
    @Test(arguments: ["fsync(temporary)", "rename(file)", "fsync(directory)"])
    func aStalledWriteNeverBlocksAGetOrASetOnAnotherThread(point: String) throws {
        try withTemporaryDirectory { directory in
            try Self.old.write(to: directory.appendingPathComponent(Self.key))
            let storage = manualStorage(Self.key, in: directory, default: "default")
            storage.wrappedValue = "new"
            let probe = StallProbe()
            let path = directory.standardizedFileURL.path
            FaultInjection.install(
                { call, name in
                    guard probe.flusher.load(ordering: .acquiring) == UInt(bitPattern: Int(bitPattern: pthread_self()))
                    else { return nil }
                    if probe.stalled.load(ordering: .acquiring) {
                        if !probe.getAndSetDone.load(ordering: .acquiring) {
                            _ = probe.proceed.wait(timeout: .now() + 60)
                        }
                        return nil
                    }
                    guard RecordedCall(call: call, name: name, fileName: Self.key).description == point else {
                        return nil
                    }
                    probe.stalled.store(true, ordering: .releasing)
                    return .stall(microseconds: 200_000)
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }

            let flusher = Thread {
                probe.flusher.store(UInt(bitPattern: Int(bitPattern: pthread_self())), ordering: .releasing)
                storage.flush()
                probe.flushReturned.store(true, ordering: .releasing)
            }
            flusher.start()
            try #require(eventually { probe.stalled.load(ordering: .acquiring) }, "the write never reached \(point)")

            let seen = storage.wrappedValue
            storage.wrappedValue = "newer"
            let writeStillInFlight = !probe.flushReturned.load(ordering: .acquiring)
            probe.getAndSetDone.store(true, ordering: .releasing)
            probe.proceed.signal()

            #expect(seen == "new")
            #expect(writeStillInFlight, "the get and the set returned only after the write")
            try #require(eventually { probe.flushReturned.load(ordering: .acquiring) }, "the flush never returned")
            #expect(storage.lastError == nil)
            // The write in flight stored the value it started with; the set made meanwhile is pending (unless another
            // test of this process called flushAll() in between, which wrote it).
            if storage.hasPendingChanges {
                #expect(contents(of: Self.key, in: directory) == Self.new)
            }
            storage.flush()
            #expect(stored(String.self, key: Self.key, in: directory) == "newer")
            #expect(!storage.hasPendingChanges)
        }
    }
}
