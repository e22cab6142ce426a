// Another program (a backup, a deploy script) holding `flock` on the storage directory does not hold up the creation
// of a storage: the clean-up of abandoned temporary files waits for the lock off the creating thread, and does its
// work once the lock is released.
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput)
struct CleanUpUnderAHeldDirectoryLockTests {
    @Test func aStorageIsCreatedWhileAnotherHoldsTheDirectorysLockAndTheCleanUpFollowsItsRelease() throws {
        try withTemporaryDirectory { directory in
            // What a writer killed in the middle of its write leaves.
            let abandoned = directory.appendingPathComponent("k~0011223344556677.tmp")
            try Data("{\"torn".utf8).write(to: abandoned)
            // A lock of its own open file description, as another program's would be.
            let held = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            try #require(held >= 0)
            var locked = flock(held, LOCK_EX) == 0
            func release() {
                if locked { _ = flock(held, LOCK_UN) }
                locked = false
            }
            defer {
                release()
                close(held)
            }
            try #require(locked)

            let storage = Lock<WLStorage<Int>?>(nil)
            let created = finishes(within: 60) {
                let made = fileStorage("k", in: directory, default: 1, flushInterval: nil)
                storage.withLock { $0 = made }
            }
            #expect(created, "creating the storage waited for the directory's lock")
            #expect(exists(abandoned), "the temporary file was removed under another's lock")
            release()
            #expect(eventually { storage.withLock { $0 } != nil })
            #expect(eventually { !exists(abandoned) }, "\(entries(of: directory))")
            let made = try #require(storage.withLock { $0 })
            #expect(made.wrappedValue == 1)
            made.flush()
            #expect(entries(of: directory) == ["k"])
        }
    }
}
