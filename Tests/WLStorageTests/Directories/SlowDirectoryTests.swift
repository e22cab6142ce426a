// A storage directory is known by what it is, not by how its path is spelled: names as bytes, directories that cannot
// be inspected, made again, mounted over or slow to look at.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

/// Runs `/bin/mount` or `/bin/umount` with `arguments`; returns whether it succeeded.
private func runMount(_ tool: String, _ arguments: [String]) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/" + tool)
    process.arguments = arguments
    guard (try? process.run()) != nil else { return false }
    return process.waitForEnd()?.status == 0
}

@Suite(.capturingOutput) struct DirectoryNameBytesTests {
    /// Two directories whose names are the same Swift string (NFC "café" and NFD "café") but different bytes, hence
    /// two directories on ext4. Each storage must keep its value in its own directory.
    @Test func directoriesWhoseNamesAreEqualStringsButDifferentBytesAreTwoDirectories() throws {
        try withTemporaryDirectory { root in
            let composed = root.path + "/caf\u{E9}"
            let decomposed = root.path + "/cafe\u{301}"
            #expect(composed == decomposed, "Swift compares strings canonically")
            #expect(Array(composed.utf8) != Array(decomposed.utf8))
            try makeDirectory(composed)
            try makeDirectory(decomposed)
            let first = try #require(identity(ofPath: composed))
            let second = try #require(identity(ofPath: decomposed))
            try #require(first != second, "the file system normalizes names; the case does not arise")

            let inComposed = storage("k", atPath: composed)
            let inDecomposed = storage("k", atPath: decomposed)
            inComposed.wrappedValue = "composed"
            inComposed.flush()
            inDecomposed.wrappedValue = "decomposed"
            inDecomposed.flush()

            #expect(inComposed.wrappedValue == "composed", "the two storages share one value")
            #expect(storedString(atPath: composed + "/k") == "composed")
            #expect(
                storedString(atPath: decomposed + "/k") == "decomposed",
                "the decomposed directory holds \(entries(of: URL(fileURLWithPath: decomposed)))")
        }
    }
}

@Suite(.capturingOutput) struct UninspectableDirectoryTests {
    /// The first storage of a directory could not learn the directory's identity (one failed `stat`, as a
    /// directory that is briefly unreachable gives), so it was registered by path; every later storage of the same
    /// file, by the same path, must still share its value.
    @Test func aStorageOpenedWhileTheDirectoryCouldNotBeInspectedSharesItsValueWithLaterOnes() throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let fail = TakenFlag(true)
            FaultInjection.install(
                { call, name in call == .stat && name == nil && fail.take() ? .fail(EIO) : nil }, forDirectory: path)
            let first = storage("k", atPath: path, default: "default")
            FaultInjection.remove(forDirectory: path)
            try #require(!fail.isSet, "the fault was not injected")
            let second = storage("k", atPath: path, default: "default")
            first.wrappedValue = "set through the first"
            #expect(second.wrappedValue == "set through the first", "one file, two values in one process")
            second.wrappedValue = "set through the second"
            second.flush()
            #expect(first.wrappedValue == "set through the second")
            // A change by another program reaches both.
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            #expect(eventually(timeout: 30) { second.wrappedValue == "outside" })
            #expect(eventually(timeout: 30) { first.wrappedValue == "outside" }, "still \(first.wrappedValue)")
        }
    }
}

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

@Suite(.capturingOutput) struct BindMountTests {
    /// `y` is a bind mount of `x`: one directory, one cell. When the bind mount goes (`umount y`), the storage of `x`
    /// still names `x`; but the shared cell writes through the path it was first opened with, `y`, which now leads to
    /// the empty directory under the mount point.
    @Test(
        .enabled(if: getuid() == 0, "bind mounts need root"),
        .disabled(
            "known limitation (Guarantees, Directories): storages of one directory share one cell, which follows the path it was first opened with"
        ))
    func aStorageOfTheRealDirectoryKeepsWritingThereAfterABindMountOfItIsUnmounted() throws {
        try withTemporaryDirectory { root in
            let x = root.path + "/x"
            let y = root.path + "/y"
            try makeDirectory(x)
            try makeDirectory(y)
            try #require(runMount("mount", ["--bind", x, y]), "cannot bind mount")
            var mounted = true
            defer { if mounted { _ = runMount("umount", [y]) } }
            let throughMount = storage("k", atPath: y)
            let real = storage("k", atPath: x)
            real.wrappedValue = "first"
            real.flush()
            try #require(throughMount.wrappedValue == "first")
            try #require(runMount("umount", [y]))
            mounted = false
            real.wrappedValue = "second"
            real.flush()
            #expect(storedString(atPath: x + "/k") == "second", "the storage of \(x) did not write there")
            #expect(storedString(atPath: y + "/k") == nil, "it wrote under the old mount point instead")
        }
    }
}

@Suite(.capturingOutput) struct DirectoryRecreatedTests {
    /// The directory is removed and made again (often with the same inode number) under a live storage; another
    /// program then writes the file there. The storage sees it, and its next write goes there too.
    @Test func aDirectoryRemovedAndMadeAgainUnderALiveStorageIsFollowed() throws {
        try withTemporaryDirectory { root in
            let path = root.path + "/store"
            try makeDirectory(path)
            let watched = storage("k", atPath: path)
            watched.wrappedValue = "before"
            watched.flush()
            try FileManager.default.removeItem(atPath: path)
            try makeDirectory(path)
            try replaceFromOutside(URL(fileURLWithPath: path + "/k"), with: "\"outside\"")
            #expect(eventually(timeout: 30) { watched.wrappedValue == "outside" }, "holds \(watched.wrappedValue)")
            watched.wrappedValue = "after"
            watched.flush()
            #expect(storedString(atPath: path + "/k") == "after")
        }
    }

    /// A directory is removed under a live storage, and a new directory elsewhere gets its inode number: a storage of
    /// the new directory must not share the old one's value.
    @Test(.enabled(if: InodeReuse.happensInTemporaryDirectories, InodeReuse.notSeenReason))
    func aNewDirectoryThatReusesARemovedOnesInodeHasItsOwnValues() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (oldStorage, new) = (reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")
            newStorage.wrappedValue = "new value"
            newStorage.flush()
            #expect(oldStorage.wrappedValue != "new value")
            #expect(storedString(atPath: new + "/k") == "new value")
        }
    }
}

@Suite(.capturingOutput) struct DirectoryMountedOverTests {
    /// A file system is mounted over a live storage's directory (a volume attached after the service started). The
    /// path now leads to another directory: the storage reads and writes there (it opens the path each time), but
    /// its cell is keyed, and its watch placed, on the directory underneath, so another program's write there is
    /// never seen, and the storage's next change overwrites it.
    @Test(
        .enabled(if: getuid() == 0, "mounting needs root"),
        .disabled(
            "known limitation (Guarantees, Directories): inotify reports no mount, so a mount over a watched directory is not noticed"
        )
    )
    func aDirectoryMountedOverIsFollowedLikeADirectoryMadeAgain() throws {
        try withTemporaryDirectory { root in
            let path = root.path + "/store"
            try makeDirectory(path)
            let watched = storage("k", atPath: path)
            watched.wrappedValue = "before"
            watched.flush()
            try #require(runMount("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", path]), "cannot mount")
            defer { _ = runMount("umount", [path]) }
            try replaceFromOutside(URL(fileURLWithPath: path + "/k"), with: "\"outside\"")
            #expect(eventually(timeout: 30) { watched.wrappedValue == "outside" }, "holds \(watched.wrappedValue)")
        }
    }
}
