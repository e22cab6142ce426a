// A directory slow to look at (a hung mount) delays neither the storages nor the changes of other directories.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct SlowDirectoryTests {
    /// The file monitor inspects a directory (`stat`, `lstat` of each component, `inotify_add_watch`) while it holds
    /// its one process-wide lock. A directory whose `stat` blocks (a hung NFS or FUSE mount) then blocks the creation
    /// and the release of every storage in every other directory.
    ///
    /// The monitor's `stat` of the slow directory is held until the test lets it go: a storage of another directory
    /// must open and be released while it is held, however long the machine takes to run either.
    @Test func aDirectoryWhoseStatHangsDoesNotBlockStoragesOfOtherDirectories() throws {
        try withTemporaryDirectory { root in
            let slow = root.path + "/slow"
            let fast = root.path + "/fast"
            try makeDirectory(slow)
            try makeDirectory(fast)
            let calls = Atomic<Int>(0)
            let inMonitor = DispatchSemaphore(value: 0)
            let letGo = DispatchSemaphore(value: 0)
            FaultInjection.install(
                { call, name in
                    // The first stat of the directory is the preparation's; the second is the monitor's.
                    if call == .stat, name == nil, calls.add(1, ordering: .relaxed).newValue == 2 {
                        inMonitor.signal()
                        letGo.wait()
                    }
                    return nil
                }, forDirectory: slow)
            defer { FaultInjection.remove(forDirectory: slow) }
            // Whatever happens below, the held stat ends (a second signal is never waited for).
            defer { letGo.signal() }
            let opened = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                _ = storage("k", atPath: slow).wrappedValue
                opened.signal()
            }
            try #require(inMonitor.wait(timeout: .now() + 60) == .success, "the monitor did not inspect the directory")
            let openedMeanwhile = finishes(within: 60) { _ = storage("k", atPath: fast).wrappedValue }
            letGo.signal()
            #expect(openedMeanwhile, "a storage of another directory waited for the held stat")
            #expect(opened.wait(timeout: .now() + 60) == .success, "the slow directory's storage did not open")
        }
    }

    /// Checks for other programs' changes run one after another on the monitor's one queue, and each reads its file
    /// there: one slow read holds up the pick-up of changes in every other directory.
    ///
    /// The read of the slow directory's file is held until the test lets it go: the change in the other directory
    /// must be seen while it is held, however long the machine takes to see it.
    @Test func aSlowReadInOneDirectoryDoesNotDelayChangesInAnother() throws {
        try withTemporaryDirectory { root in
            let slow = root.path + "/slow"
            let fast = root.path + "/fast"
            try makeDirectory(slow)
            try makeDirectory(fast)
            let slowStorage = storage("k", atPath: slow)
            let fastStorage = storage("k", atPath: fast)
            slowStorage.flush()
            fastStorage.flush()
            let stall = TakenFlag(false)
            let stalled = DispatchSemaphore(value: 0)
            let letGo = DispatchSemaphore(value: 0)
            FaultInjection.install(
                { call, name in
                    if call == .read, stall.take() {
                        stalled.signal()
                        letGo.wait()
                    }
                    return nil
                }, forDirectory: slow)
            defer { FaultInjection.remove(forDirectory: slow) }
            // Whatever happens below, the held read ends (a second signal is never waited for).
            defer { letGo.signal() }
            stall.set(true)
            try replaceFromOutside(URL(fileURLWithPath: slow + "/k"), with: "\"slow\"")
            try #require(stalled.wait(timeout: .now() + 60) == .success, "the check of the slow file did not start")
            try replaceFromOutside(URL(fileURLWithPath: fast + "/k"), with: "\"fast\"")
            #expect(
                eventually(timeout: 60) { fastStorage.wrappedValue == "fast" },
                "the change in another directory waited for the held read")
            letGo.signal()
            #expect(eventually(timeout: 60) { slowStorage.wrappedValue == "slow" })
        }
    }
}
