// Another program (a backup, a deploy script) holding `flock` on the storage directory does not hold up the creation
// of a storage: the clean-up of abandoned temporary files waits for the lock off the creating thread, and does its
// work once the lock is released.
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput)
struct CleanUpUnderAHeldDirectoryLockTests {
    @Test func aStorageIsCreatedWhileAnotherHoldsTheDirectorysLockAndTheCleanUpFollowsItsRelease() throws {
        try withTemporaryDirectory { directory in
            // What a writer killed in the middle of its write leaves.
            let abandoned = directory.appendingPathComponent("k~0011223344556677.tmp")
            try Data("{\"torn".utf8).write(to: abandoned)
            let lock = try HeldDirectoryLock(directory)

            let storage = Lock<WLStorage<Int>?>(nil)
            let created = finishes(within: 60) {
                let made = fileStorage("k", in: directory, default: 1, flushInterval: nil)
                storage.withLock { $0 = made }
            }
            #expect(created, "creating the storage waited for the directory's lock")
            #expect(exists(abandoned), "the temporary file was removed under another's lock")
            lock.release()
            #expect(eventually { storage.withLock { $0 } != nil })
            #expect(eventually { !exists(abandoned) }, "\(entries(of: directory))")
            let made = try #require(storage.withLock { $0 })
            #expect(made.wrappedValue == 1)
            made.flush()
            #expect(entries(of: directory) == ["k"])
        }
    }

    /// Stores of one directory made and released over and over while another program holds the directory's lock: one
    /// clean-up waits for the lock, not one for each store (each would hold a thread until the lock is released).
    @Test func storesMadeAndReleasedUnderAHeldDirectoryLockLeaveOneCleanUpWaiting() throws {
        try withTemporaryDirectory { directory in
            let abandoned = directory.appendingPathComponent("k~0011223344556677.tmp")
            try Data("{\"torn".utf8).write(to: abandoned)
            // A working writer's temporary file, which every clean-up finds and leaves.
            let working = directory.appendingPathComponent("k~8899aabbccddeeff.tmp")
            try Data("{\"half".utf8).write(to: working)
            let writer = open(working.path, O_RDONLY | O_CLOEXEC)
            try #require(writer >= 0)
            defer { close(writer) }
            try #require(flock(writer, LOCK_EX) == 0)
            try Data("1".utf8).write(to: directory.appendingPathComponent("k"))
            let lock = try HeldDirectoryLock(directory)
            // The directory's lock asked for on other threads than this one: by the clean-ups left to later.
            let path = directory.standardizedFileURL.path
            let thread = pthread_self()
            let cleanUps = Atomic(0)
            FaultInjection.install(
                { call, name in
                    if call == .flock, name == nil, pthread_equal(pthread_self(), thread) == 0 {
                        cleanUps.add(1, ordering: .relaxed)
                    }
                    return nil
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }

            for _ in 0..<20 {
                let store = WLStorageDirectoryStore.directory(directory)
                #expect(try store.read(key: "k") == Data("1".utf8))
            }
            #expect(exists(abandoned), "the temporary file was removed under another's lock")
            lock.release()
            // Every clean-up left to later has run once this returns.
            FileSystemState.shared.cleanUps.sync(flags: .barrier) {}
            #expect(!exists(abandoned))
            #expect(exists(working))
            #expect(cleanUps.load(ordering: .relaxed) == 1, "clean-ups that waited for the directory's lock")
        }
    }
}

/// The exclusive `flock` of a directory, held through an open file description of its own, as another program's would
/// be; released by ``release()`` or at the end.
private final class HeldDirectoryLock {
    private let descriptor: CInt
    private var locked = false

    init(_ directory: URL) throws {
        descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(descriptor >= 0)
        locked = flock(descriptor, LOCK_EX) == 0
        try #require(locked)
    }

    func release() {
        if locked { _ = flock(descriptor, LOCK_UN) }
        locked = false
    }

    deinit {
        release()
        close(descriptor)
    }
}
