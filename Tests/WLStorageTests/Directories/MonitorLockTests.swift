// The monitor looks at a directory outside its lock: one that is slow to look at holds up no other.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct MonitorLockTests {
    @Test func aDirectoryThatIsSlowToLookAtDoesNotHoldUpTheWatchesOfOthers() throws {
        try withTemporaryDirectory { root in
            let slow = root.appendingPathComponent("slow")
            let other = root.appendingPathComponent("other")
            for directory in [slow, other] {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            }
            let slowPath = slow.standardizedFileURL.path
            // The first stat of the slow directory is held until the test lets it go, however long the other
            // directory's watch takes meanwhile.
            let stall = TakenFlag(true)
            let stalled = DispatchSemaphore(value: 0)
            let proceed = DispatchSemaphore(value: 0)
            FaultInjection.install(
                { call, name in
                    if call == .stat, name == nil, stall.take() {
                        stalled.signal()
                        proceed.wait()
                    }
                    return nil
                }, forDirectory: slowPath)
            defer { FaultInjection.remove(forDirectory: slowPath) }
            // Whatever happens below, the held stat ends (a second signal is never waited for).
            defer { proceed.signal() }

            let slowDone = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                Runtime.shared.monitor.watch(StorageDirectory(path: slowPath))
                slowDone.signal()
            }
            try #require(stalled.wait(timeout: .now() + 60) == .success)
            // While the slow directory is being looked at, another directory is watched and let go of.
            let otherDone = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let directory = StorageDirectory(path: other.standardizedFileURL.path)
                Runtime.shared.monitor.watch(directory)
                Runtime.shared.monitor.unwatch(directory)
                otherDone.signal()
            }
            let served = otherDone.wait(timeout: .now() + 60) == .success
            proceed.signal()
            #expect(served, "another directory waited for the slow one")
            try #require(slowDone.wait(timeout: .now() + 60) == .success)
            if !served { _ = otherDone.wait(timeout: .now() + 60) }
            Runtime.shared.monitor.unwatch(StorageDirectory(path: slowPath))
        }
    }
}
