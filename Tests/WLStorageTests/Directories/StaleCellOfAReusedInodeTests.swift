// A storage whose directory was removed while it lived, when a new directory elsewhere takes the removed one's inode,
// is moved out of the new directory's way; once its own path is made again, it is that path's storage again.
import Foundation
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput, .enabled(if: InodeReuse.happensInTemporaryDirectories, InodeReuse.notSeenReason))
struct StaleCellOfAReusedInodeTests {
    /// A directory is removed under a live storage, a new directory elsewhere gets its inode (a storage of the new one
    /// moves the old storage out of its way), and the old path is made again. The old storage follows its path: it
    /// reads another program's write there, its writes go there, and a storage opened there later shares its value.
    @Test func aStorageMovedOutOfAReusedInodesWayIsItsPathsStorageOnceThePathIsMadeAgain() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")

            try makeDirectory(old)
            try replaceFromOutside(URL(fileURLWithPath: old + "/k"), with: "\"outside\"")
            #expect(
                eventually(timeout: 30) { oldStorage.wrappedValue == "outside" },
                "holds \(oldStorage.wrappedValue)")
            // Opened at the old path now, a storage shares the old storage's cell: a set through one is the
            // other's at once, with no flush.
            let later = storage("k", atPath: old)
            later.wrappedValue = "shared"
            #expect(oldStorage.wrappedValue == "shared")
            later.flush()
            #expect(storedString(atPath: old + "/k") == "shared")
            #expect(newStorage.wrappedValue == "new default")
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }

    /// A storage opened at the removed directory's path as soon as it is made again, before the file monitor's poll
    /// (every 500 ms) has looked at the path, is that path's storage: it shares the old storage's value and writes at
    /// its own path, not in the new directory that took the old one's inode.
    @Test func aStorageOpenedAtAPathMadeAgainBeforeThePollIsThatPathsStorage() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")

            try makeDirectory(old)
            let later = storage("k", atPath: old)
            later.wrappedValue = "made at the old path"
            #expect(oldStorage.wrappedValue == "made at the old path")
            #expect(newStorage.wrappedValue == "new default")
            later.flush()
            newStorage.flush()
            #expect(storedString(atPath: old + "/k") == "made at the old path")
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }

    /// The same once the new directory's storage is gone: a storage opened at the path made again shares the value
    /// of the old storage, which was moved out of the new directory's way, rather than open a second cell of the
    /// file.
    @Test func aStorageOpenedAtAPathMadeAgainSharesTheValueOfTheStorageMovedOutOfTheWay() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            weak var newCell: AnyObject?
            do {
                let newStorage = storage("k", atPath: new, default: "new default")
                #expect(newStorage.wrappedValue == "new default")
                newStorage.flush()
                newCell = newStorage.cell
            }
            // A job that just ended may hold the cell a moment longer.
            #expect(eventually(timeout: 30) { newCell == nil }, "the new directory's storage is let go of")

            try makeDirectory(old)
            let later = storage("k", atPath: old)
            later.wrappedValue = "made at the old path"
            #expect(oldStorage.wrappedValue == "made at the old path")
            later.flush()
            #expect(storedString(atPath: old + "/k") == "made at the old path")
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }

    /// A storage whose write made its removed directory again, on another inode than the removed one's (a new
    /// directory took that), after the file monitor found the path leading nowhere and before it looked again: a
    /// storage opened at the path then shares the old storage's cell, rather than open a second cell of its file.
    @Test func aStorageOpenedAtAPathTheOldStoragesWriteMadeAgainSharesItsCell() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let taken = try #require(identity(ofPath: new))
            let path = StorageDirectory(path: old)
            #expect(
                eventually(timeout: 30) {
                    Runtime.shared.monitor.isPolled(path) && Runtime.shared.monitor.identity(of: path) == nil
                },
                "the monitor did not find \(old) leading nowhere")
            try whileTheFileMonitorIsHeld(scratch: root) {
                oldStorage.wrappedValue = "written again"
                oldStorage.flush()
                #expect(storedString(atPath: old + "/k") == "written again")
                try #require(identity(ofPath: old).map { $0 != taken } == true, "\(old) was made on its old inode")

                let later = storage("k", atPath: old)
                #expect(later.cell === oldStorage.cell, "the storage of \(old) has a cell of its own")
                later.wrappedValue = "shared"
                #expect(oldStorage.wrappedValue == "shared")
                later.flush()
                #expect(storedString(atPath: old + "/k") == "shared")
                #expect(storedString(atPath: new + "/k") == nil)
            }
        }
    }

    /// A storage moved out of a new directory's way, with a set pending, is still one of every storage: a flush of
    /// every storage writes its set, at its own path.
    @Test func aStorageMovedOutOfAReusedInodesWayIsWrittenByAFlushOfEveryStorage() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")

            oldStorage.wrappedValue = "pending"
            #expect(oldStorage.hasPendingChanges)
            // Every live cell is looked at, and this test's flushed: not those the tests beside keep pending.
            let cells = [oldStorage.cell, newStorage.cell]
            ShutdownHandling.flushEverything(only: { cell in cells.contains { $0 === cell } })
            #expect(!oldStorage.hasPendingChanges)
            #expect(storedString(atPath: old + "/k") == "pending")
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }
}
