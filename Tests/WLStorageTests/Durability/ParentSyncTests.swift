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
}
