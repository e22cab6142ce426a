// The parents of a storage directory are synced once per process, whether or not this process made them.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

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

    /// Two directories made at once in a new parent: the second does not take the parent for synced while the
    /// first's sync of it is under way, so when that sync fails the parent is synced for the second all the same.
    @Test func aParentIsSyncedForADirectoryMadeBesideAnotherWhoseSyncOfItFails() throws {
        try withTemporaryDirectory { root in
            // The parents of the test's folder, and the folder itself, synced: the new parent is the one left.
            try StorageDirectory(path: root.appendingPathComponent("x").standardizedFileURL.path).create()
            let parent = root.appendingPathComponent("p")
            let first = StorageDirectory(path: parent.appendingPathComponent("a").standardizedFileURL.path)
            let second = StorageDirectory(path: parent.appendingPathComponent("b").standardizedFileURL.path)
            let reached = DispatchSemaphore(value: 0)
            let go = DispatchSemaphore(value: 0)
            let blocked = Atomic(false)
            // The first's sync of a parent waits for the second directory to be made, then fails, as each later one.
            FaultInjection.install(
                { call, name in
                    guard call == .fsync, name == ".." else { return nil }
                    if !blocked.exchange(true, ordering: .relaxed) {
                        reached.signal()
                        _ = go.wait(timeout: .now() + 60)
                    }
                    return .fail(EIO)
                }, forDirectory: first.path)
            let synced = Lock(0)
            FaultInjection.install(
                { call, name in
                    if call == .fsync, name == ".." { synced.withLock { $0 += 1 } }
                    return nil
                }, forDirectory: second.path)
            defer {
                FaultInjection.remove(forDirectory: first.path)
                FaultInjection.remove(forDirectory: second.path)
            }
            let firstDone = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                _ = try? first.create()
                firstDone.signal()
            }
            try #require(reached.wait(timeout: .now() + 60) == .success)
            try second.create()
            go.signal()
            try #require(firstDone.wait(timeout: .now() + 60) == .success)
            #expect(synced.withLock { $0 } >= 1, "the parent was not synced for the second directory")
        }
    }
}
