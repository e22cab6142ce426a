// A directory removed and made again under a live storage is followed; one that reuses a removed inode is new.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

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
