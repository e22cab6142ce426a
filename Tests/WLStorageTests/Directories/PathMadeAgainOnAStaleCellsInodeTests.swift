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
