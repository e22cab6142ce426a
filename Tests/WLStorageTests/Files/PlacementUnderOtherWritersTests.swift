// What a write puts in place in a directory where other writers are at work at the same moment: a clean-up of
// abandoned temporary files (another thread's first use of the directory, or another program's start), and other
// conditional replacements of the same file with a plain write between them.
import Dispatch
import Foundation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.onTestThreads)
struct PlacementUnderOtherWritersTests {
    enum Placement: String, CaseIterable, Sendable {
        case write, create, conditionalReplacement
    }

    /// A clean-up of abandoned temporary files starts in the moment after the written file is closed (and its lock
    /// released with it) and before it is put in place. It does not remove the file: the write puts it in place as if
    /// no clean-up had run.
    @Test(arguments: Placement.allCases)
    func aCleanUpJustBeforeTheWrittenFileIsPutInPlaceLeavesIt(placement: Placement) throws {
        try withTemporaryDirectory { url in
            let directory = StorageDirectory(path: url.path)
            let file = url.appendingPathComponent("key")
            if placement != .create { try Data("1".utf8).write(to: file) }
            let expected = try directory.readVersion("key", limit: .max)?.identity
            let testThread = pthread_self()
            let cleanUp = CleanUpAtTheMoment(directory: directory)
            FaultInjection.install(
                { call, name in
                    if pthread_equal(pthread_self(), testThread) == 0 {
                        if call == .flock, name == nil {
                            cleanUp.reachedTheLock.store(true, ordering: .sequentiallyConsistent)
                        }
                        return nil
                    }
                    // The first look at the key's name after the written file is closed: the check of what stands
                    // there, or (creating) the move into place.
                    if call == .stat || call == .rename, name == "key" { cleanUp.runOnce() }
                    return nil
                },
                forDirectory: directory.path)
            defer { FaultInjection.remove(forDirectory: directory.path) }

            let placed: FileIdentity?
            do {
                switch placement {
                case .write: placed = try directory.write("key", contents: Data("2".utf8), announced: false)
                case .create: placed = try directory.create("key", contents: Data("2".utf8), announced: false)
                case .conditionalReplacement:
                    placed = try directory.write(
                        "key", contents: Data("2".utf8), ifStill: try #require(expected), announced: false)
                }
            } catch {
                cleanUp.wait()
                Issue.record("the write failed: \(error)")
                return
            }
            cleanUp.wait()
            #expect(cleanUp.ran, "the clean-up did not run at the moment")
            #expect(placed != nil, "the write gave way to no other version")
            #expect(try String(contentsOf: file, encoding: .utf8) == "2")
            let names = try FileManager.default.contentsOfDirectory(atPath: url.path)
            #expect(names == ["key"], "\(names)")
        }
    }

    /// Two conditional replacements of a file (two programs that read it in an older shape) and another program's
    /// plain write, interleaved so that each replacement exchanges files at the name while the other puts back what
    /// it displaced. The plain write came after both replacements checked the file: it is the value that ends in
    /// place, and no replacement removes it.
    @Test func twoConditionalReplacementsAtOnceDoNotRemoveAWriteMadeBetweenThem() throws {
        try withTemporaryDirectory { url in
            let directory = StorageDirectory(path: url.path)
            let file = url.appendingPathComponent("key")
            try Data("read".utf8).write(to: file)
            let expected = try #require(try directory.readVersion("key", limit: .max)?.identity)
            let script = ExchangeScript(file: file)
            FaultInjection.install({ call, name in script.step(call, name) }, forDirectory: directory.path)
            defer { FaultInjection.remove(forDirectory: directory.path) }

            let results = Lock<[Int: Result<FileIdentity?, WLStorageError>]>([:])
            let group = DispatchGroup()
            for side in 0..<2 {
                group.enter()
                Thread.detachNewThread {
                    script.enter(side)
                    let result = Result { () throws(WLStorageError) -> FileIdentity? in
                        try directory.write(
                            "key", contents: Data("rewrite \(side)".utf8), ifStill: expected, announced: false)
                    }
                    results.withLock { $0[side] = result }
                    group.leave()
                }
            }
            #expect(group.wait(timeout: .now() + .seconds(60)) == .success, "a replacement did not end")
            #expect(script.wroteBetween, "the other program's write was not made")
            let stored = try String(contentsOf: file, encoding: .utf8)
            #expect(stored == "set", "a rewrite replaced the write made after it read the file: \(stored)")
            for (side, result) in results.withLock({ $0 }) {
                if case .failure(let error) = result { Issue.record("replacement \(side) failed: \(error)") }
            }
            let names = try FileManager.default.contentsOfDirectory(atPath: url.path)
            #expect(names == ["key"], "\(names)")
        }
    }
}

/// A clean-up of a directory's abandoned temporary files, run on another thread at a moment of a test's write. The
/// write waits until the clean-up ends, or until it has stood at the directory's lock for a while.
private final class CleanUpAtTheMoment: Sendable {
    let directory: StorageDirectory
    let reachedTheLock = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let finished = Atomic<Bool>(false)

    init(directory: StorageDirectory) { self.directory = directory }

    var ran: Bool { started.load(ordering: .sequentiallyConsistent) }

    func runOnce() {
        guard !started.exchange(true, ordering: .sequentiallyConsistent) else { return }
        Thread.detachNewThread { [self] in
            _ = try? directory.removeAbandonedTemporaryFiles()
            finished.store(true, ordering: .sequentiallyConsistent)
            done.signal()
        }
        // The clean-up lists the temporary files, then takes the lock: either it ends, or it stands there.
        let deadline = Date().addingTimeInterval(10)
        while !finished.load(ordering: .sequentiallyConsistent), Date() < deadline {
            if reachedTheLock.load(ordering: .sequentiallyConsistent) {
                _ = done.wait(timeout: .now() + .milliseconds(300))
                if finished.load(ordering: .sequentiallyConsistent) { done.signal() }
                return
            }
            usleep(1_000)
        }
        if finished.load(ordering: .sequentiallyConsistent) { done.signal() }
    }

    /// Waits until the clean-up has ended.
    func wait() {
        guard ran else { return }
        _ = done.wait(timeout: .now() + .seconds(30))
    }
}

/// Orders the renames at a file's name of two conditional replacements (each on its own thread; the first to come to
/// a rename is A, the other B) as A, B, A, B, B, A, and makes another program's plain write just before the first: A
/// exchanges its file in and takes the write; B exchanges its file in and takes A's; A puts the write back and takes
/// B's file; B takes the write and puts A's file back, then puts the write back and removes A's file; A then takes
/// the write again. A rename is known to be done at the side's next system call. Each wait ends after a while, so
/// that where the replacements cannot interleave so, the test goes on in whatever order they take.
private final class ExchangeScript: Sendable {
    private struct State {
        var threads: [Int: pthread_t] = [:]
        var renames: [Int: Int] = [:]
        var pending: [Int: Int] = [:]
        /// The part of each side in the order: the first side to come to a rename plays the first.
        var roles: [Int: Int] = [:]
        var turn = 0
        var wroteBetween = false
    }

    private static let order = [0, 1, 0, 1, 1, 0]
    private let state = Lock(State())
    private let file: URL

    init(file: URL) { self.file = file }

    var wroteBetween: Bool { state.withLock { $0.wroteBetween } }

    func enter(_ side: Int) { state.withLock { $0.threads[side] = pthread_self() } }

    func step(_ call: SystemCall, _ name: String?) -> InjectedFault? {
        let me = pthread_self()
        guard
            let side = state.withLock({ state in
                state.threads.first { pthread_equal($0.value, me) != 0 }?.key
            })
        else { return nil }
        state.withLock { state in
            if let done = state.pending.removeValue(forKey: side) { state.turn = max(state.turn, done + 1) }
        }
        guard call == .rename, name == "key" else { return nil }
        let global: Int? = state.withLock { state in
            let role = state.roles[side] ?? state.roles.count
            state.roles[side] = role
            let nth = state.renames[side, default: 0]
            state.renames[side] = nth + 1
            let slots = Self.order.indices.filter { Self.order[$0] == role }
            return nth < slots.count ? slots[nth] : nil
        }
        guard let global else { return nil }
        if global == 0 {
            wait { $0.roles.count == 2 }
            try? replaceFromOutside(file, with: "set")
            state.withLock { $0.wroteBetween = true }
        }
        wait { $0.turn >= global }
        state.withLock { $0.pending[side] = global }
        return nil
    }

    private func wait(until condition: (State) -> Bool) {
        let deadline = Date().addingTimeInterval(0.5)
        while !state.withLock({ condition($0) }), Date() < deadline { usleep(500) }
    }
}
