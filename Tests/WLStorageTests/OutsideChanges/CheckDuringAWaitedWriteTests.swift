// A check asked for during a write that a flush waits for is not lost.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

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
            try #require(stopped.wait(timeout: .now() + 60) == .success)
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
            try #require(flushed.wait(timeout: .now() + 60) == .success)
            #expect(eventually(timeout: 30) { storage.wrappedValue == "outside" }, "still \(storage.wrappedValue)")
        }
    }
}
