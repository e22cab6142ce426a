// A storage whose directory was removed while it lived is keyed by its path once a storage opened there found the path
// leads nowhere. When the path is made again on the inode of another directory removed under its own storage (whose
// cell is still keyed by that inode), a storage opened at the path is that path's storage, not a second cell of its
// file, nor the other directory's.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput, .enabled(if: InodeReuse.happensInTemporaryDirectories, InodeReuse.notSeenReason))
struct PathMadeAgainOnAStaleCellsInodeTests {
    /// Storages opened at the removed path before and after it leads to the inode of another directory's stale storage
    /// share the old storage's cell: the stale storage is moved out of the way, and the path's cell takes the key.
    ///
    /// The other directory is renamed to the path, which gives the path a chosen inode: the one a directory made there
    /// gets when another test has just removed a directory under a live storage of the same key.
    @Test func storagesOpenedAtTheRemovedPathShareOneCellWhenItLeadsToAStaleStoragesInode() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let other = root.path + "/other"
            try makeDirectory(other)
            let otherStorage = storage("k", atPath: other, default: "other default")
            otherStorage.wrappedValue = "other value"
            otherStorage.flush()
            try whileTheFileMonitorIsHeld(scratch: root) {
                weak var newCell: AnyObject?
                var first: WLStorage<String>?
                do {
                    let newStorage = storage("k", atPath: new, default: "new default")
                    #expect(newStorage.wrappedValue == "new default")
                    newStorage.flush()
                    newCell = newStorage.cell
                    first = storage("k", atPath: old)
                }
                #expect(eventually(timeout: 30) { newCell == nil }, "the new directory's storage is let go of")
                // The other directory goes, its storage alive: the old path leads to its inode, and holds its file.
                try #require(rename(other, old) == 0, "\(other) was not renamed to \(old)")

                let second = storage("k", atPath: old)
                #expect(first?.cell === oldStorage.cell, "the first storage has a cell of its own")
                #expect(second.cell === oldStorage.cell, "the second storage has a cell of its own")
                #expect(second.cell !== otherStorage.cell, "the second storage is the one of \(other)")
                second.wrappedValue = "at the old path"
                #expect(first?.wrappedValue == "at the old path")
                second.flush()
                #expect(storedString(atPath: old + "/k") == "at the old path")
                #expect(storedString(atPath: new + "/k") == "new default")
            }
        }
    }
}

@Suite(.capturingOutput)
struct PathMovedOntoAStaleCellsInodeTests {
    /// A directory removed under its storage, and another directory, its own storage alive, renamed to the removed
    /// one's path: once the file monitor has seen the path lead there (the old storage's cell could not take the key,
    /// the stale storage's), a storage opened at the path shares the old storage's cell.
    @Test func aStorageOpenedAtAPathMovedOntoAStaleStoragesInodeSharesThePathsCell() throws {
        try withTemporaryDirectory { root in
            let (old, other) = (root.path + "/old", root.path + "/other")
            try makeDirectory(old)
            try makeDirectory(other)
            let oldStorage = storage("k", atPath: old)
            oldStorage.wrappedValue = "old value"
            oldStorage.flush()
            let otherStorage = storage("k", atPath: other, default: "other default")
            otherStorage.wrappedValue = "other value"
            otherStorage.flush()
            let moved = try StorageDirectory(path: other).identity()

            try FileManager.default.removeItem(atPath: old)
            try #require(rename(other, old) == 0, "\(other) was not renamed to \(old)")
            let path = StorageDirectory(path: old)
            #expect(
                eventually(timeout: 30) { Runtime.shared.monitor.identity(of: path) == moved },
                "the monitor did not see \(old) lead to the moved directory")
            // Held once the monitor is done with what it saw: the look at the path has moved what cells it could.
            try whileTheFileMonitorIsHeld(scratch: root) {
                let later = storage("k", atPath: old)
                #expect(later.cell === oldStorage.cell, "the storage of \(old) has a cell of its own")
                #expect(later.cell !== otherStorage.cell, "the storage of \(old) is the one of \(other)")
                later.wrappedValue = "at the path"
                #expect(oldStorage.wrappedValue == "at the path")
                later.flush()
                #expect(storedString(atPath: old + "/k") == "at the path")
            }
        }
    }
}
