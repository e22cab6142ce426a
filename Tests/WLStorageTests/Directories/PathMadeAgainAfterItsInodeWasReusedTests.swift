// Storages opened at the path of a directory removed while a storage of it lived, whose inode a new directory elsewhere
// took, before the file monitor has looked at the path again: each is that path's storage, shares one cell with every
// other storage of the path, and writes at the path, never in the directory that took the inode.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput, .enabled(if: InodeReuse.happensInTemporaryDirectories, InodeReuse.notSeenReason))
struct PathMadeAgainAfterItsInodeWasReusedTests {
    /// Two storages opened one after the other at the path made again, once the new directory's storage (which moved
    /// the old storage out of its way) is gone, share the old storage's cell: the second as much as the first.
    @Test func everyStorageOpenedAtThePathMadeAgainSharesOneCellOnceTheNewDirectorysStorageIsGone() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            try openAndLetGoOfAStorage(atPath: new)

            // The monitor looks at no path meanwhile: each storage is opened before it could.
            try whileTheFileMonitorIsHeld(scratch: root) {
                try makeDirectory(old)
                let first = storage("k", atPath: old)
                let second = storage("k", atPath: old)
                #expect(first.cell === oldStorage.cell, "the first storage has a cell of its own")
                #expect(second.cell === oldStorage.cell, "the second storage has a cell of its own")
                second.wrappedValue = "made at the old path"
                #expect(oldStorage.wrappedValue == "made at the old path")
                #expect(first.wrappedValue == "made at the old path")
                second.flush()
                #expect(storedString(atPath: old + "/k") == "made at the old path")
                #expect(storedString(atPath: new + "/k") == "new default")
            }
        }
    }

    /// The same when the first storage opened at the path made again found the new directory's storage, which was let
    /// go of before the second was opened.
    @Test func aStorageOpenedAtThePathMadeAgainAfterTheNewDirectorysStorageWentSharesTheCellOfTheOneBefore() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            try whileTheFileMonitorIsHeld(scratch: root) {
                weak var newCell: AnyObject?
                var first: WLStorage<String>?
                do {
                    let newStorage = storage("k", atPath: new, default: "new default")
                    #expect(newStorage.wrappedValue == "new default")
                    newStorage.flush()
                    newCell = newStorage.cell
                    try makeDirectory(old)
                    first = storage("k", atPath: old)
                }
                #expect(eventually(timeout: 30) { newCell == nil }, "the new directory's storage is let go of")
                let second = storage("k", atPath: old)
                #expect(first?.cell === oldStorage.cell, "the first storage has a cell of its own")
                #expect(second.cell === oldStorage.cell, "the second storage has a cell of its own")
                second.wrappedValue = "made at the old path"
                #expect(first?.wrappedValue == "made at the old path")
                second.flush()
                #expect(storedString(atPath: old + "/k") == "made at the old path")
                #expect(storedString(atPath: new + "/k") == "new default")
            }
        }
    }

    /// A storage opened at the removed directory's path, not made again, makes the directory and writes there, never
    /// in the directory that took the removed one's inode; so does the old storage.
    @Test func aStorageOpenedAtTheRemovedPathWritesThereNotInTheDirectoryThatTookItsInode() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")
            newStorage.flush()

            let later = storage("k", atPath: old, default: "later default")
            #expect(later.cell !== newStorage.cell, "the storage of \(old) is the one of \(new)")
            later.wrappedValue = "at the old path"
            later.flush()
            #expect(storedString(atPath: old + "/k") == "at the old path")
            #expect(newStorage.wrappedValue == "new default")
            newStorage.flush()
            #expect(storedString(atPath: new + "/k") == "new default")
            oldStorage.wrappedValue = "old storage"
            oldStorage.flush()
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }

    /// A storage opened at the removed directory's path, not made again, shares the old storage's cell, as it does
    /// when no directory took the removed one's inode.
    @Test func aStorageOpenedAtTheRemovedPathSharesTheOldStoragesCell() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")
            newStorage.flush()

            let later = storage("k", atPath: old)
            #expect(later.cell === oldStorage.cell, "the storage of \(old) has a cell of its own")
            later.wrappedValue = "shared"
            #expect(oldStorage.wrappedValue == "shared")
            later.flush()
            #expect(storedString(atPath: old + "/k") == "shared")
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }

    /// The old storage follows its file once a storage opened at the removed path made the directory again: it holds
    /// what that storage writes, and what another program writes there.
    @Test func theOldStorageFollowsItsFileOnceAStorageOpenedAtTheRemovedPathMadeItAgain() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")
            newStorage.flush()
            let later = storage("k", atPath: old)
            later.wrappedValue = "first"
            later.flush()
            #expect(storedString(atPath: old + "/k") == "first")
            #expect(eventually(timeout: 30) { oldStorage.wrappedValue == "first" }, "holds \(oldStorage.wrappedValue)")
            // Once the monitor watches the directory made again, and no longer polls it.
            #expect(eventually(timeout: 30) { !Runtime.shared.monitor.isPolled(StorageDirectory(path: old)) })
            later.wrappedValue = "second"
            later.flush()
            #expect(eventually(timeout: 30) { oldStorage.wrappedValue == "second" }, "holds \(oldStorage.wrappedValue)")
            try replaceFromOutside(URL(fileURLWithPath: old + "/k"), with: "\"outside\"")
            #expect(
                eventually(timeout: 30) { oldStorage.wrappedValue == "outside" }, "holds \(oldStorage.wrappedValue)")
            #expect(eventually(timeout: 30) { later.wrappedValue == "outside" }, "holds \(later.wrappedValue)")
            #expect(newStorage.wrappedValue == "new default")
            newStorage.flush()
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }

    /// Two storages opened one after the other at the removed path, not made again, the new directory's storage let
    /// go of in between, share the old storage's cell.
    @Test func storagesOpenedAtTheRemovedPathShareOneCellOnceTheNewDirectorysStorageIsGone() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
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
                let second = storage("k", atPath: old)
                #expect(first?.cell === oldStorage.cell, "the first storage has a cell of its own")
                #expect(second.cell === oldStorage.cell, "the second storage has a cell of its own")
                second.wrappedValue = "at the old path"
                #expect(first?.wrappedValue == "at the old path")
                second.flush()
                #expect(storedString(atPath: old + "/k") == "at the old path")
                #expect(storedString(atPath: new + "/k") == "new default")
            }
        }
    }

    /// When the path leads to its old inode again (the new directory that took it is renamed to the path), a storage
    /// opened there shares the old storage's cell, which was moved out of the new directory's way.
    @Test func aStorageOpenedAtThePathMadeAgainWithItsOwnInodeSharesTheOldStoragesCell() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let inode = try #require(identity(ofPath: new))
            try openAndLetGoOfAStorage(atPath: new)
            try whileTheFileMonitorIsHeld(scratch: root) {
                // Renamed rather than removed and made again: a new directory gets a freed inode only by chance, which
                // other tests making files meanwhile can take first (and the monitor stays held only a moment).
                try #require(rename(new, old) == 0, "the new directory was not renamed to \(old)")
                try #require(identity(ofPath: old).map { $0 == inode } == true, "the path leads to its old inode")

                let later = storage("k", atPath: old)
                #expect(later.cell === oldStorage.cell, "the storage of \(old) has a cell of its own")
                later.wrappedValue = "made again"
                #expect(oldStorage.wrappedValue == "made again")
                later.flush()
                #expect(storedString(atPath: old + "/k") == "made again")
            }
        }
    }

    /// Storages opened at the path made again from several threads while the old storage is let go of share one
    /// cell, which is none of the new directory's storage.
    @Test func storagesOpenedAtThePathMadeAgainWhileTheOldStorageIsLetGoOfShareOneCell() throws {
        try withTemporaryDirectory { root in
            for round in 0..<10 {
                let scratch = root.appendingPathComponent("round\(round)")
                try makeDirectory(scratch.path)
                let (old, new, oldStorage) = try {
                    let reused = try directoryReusingARemovedOnesInode(in: scratch)
                    return (reused.oldPath, reused.newPath, Droppable(reused.oldStorage))
                }()
                let newStorage = storage("k", atPath: new, default: "new default")
                #expect(newStorage.wrappedValue == "new default")
                newStorage.flush()
                try makeDirectory(old)
                let opened = Lock<[WLStorage<String>]>([])
                DispatchQueue.concurrentPerform(iterations: 4) { index in
                    if index == 0 {
                        oldStorage.drop()
                    } else {
                        let storage = storage("k", atPath: old)
                        opened.withLock { $0.append(storage) }
                    }
                }
                let storages = opened.withLock { $0 }
                #expect(storages.allSatisfy { $0.cell === storages[0].cell }, "the storages of \(old) have two cells")
                #expect(storages.allSatisfy { $0.cell !== newStorage.cell }, "a storage of \(old) is one of \(new)")
                storages[0].wrappedValue = "made at the old path"
                storages[0].flush()
                #expect(storedString(atPath: old + "/k") == "made at the old path")
                #expect(newStorage.wrappedValue == "new default")
                newStorage.flush()
                #expect(storedString(atPath: new + "/k") == "new default")
            }
        }
    }

    /// Storages opened at the path made again from several threads at once, while storages of the new directory are
    /// opened and let go of, all share the old storage's cell, and none is the new directory's.
    @Test func storagesOpenedAtThePathMadeAgainFromSeveralThreadsShareTheOldStoragesCell() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let first = storage("k", atPath: new, default: "new default")
            #expect(first.wrappedValue == "new default")
            first.flush()
            try makeDirectory(old)

            let threads = 6
            let cells = Lock<[ObjectIdentifier]>([])
            let newCells = Lock<Set<ObjectIdentifier>>([])
            let newStoragesDone = Atomic<Bool>(false)
            DispatchQueue.global().async {
                for _ in 0..<50 {
                    let newStorage = storage("k", atPath: new, default: "new default")
                    newCells.withLock { _ = $0.insert(ObjectIdentifier(newStorage.cell)) }
                }
                newStoragesDone.store(true, ordering: .sequentiallyConsistent)
            }
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                let opened = storage("k", atPath: old)
                cells.withLock { $0.append(ObjectIdentifier(opened.cell)) }
            }
            #expect(eventually(timeout: 30) { newStoragesDone.load(ordering: .sequentiallyConsistent) })
            let oldCell = ObjectIdentifier(oldStorage.cell)
            let opened = cells.withLock { $0 }
            #expect(opened.count == threads)
            #expect(opened.allSatisfy { $0 == oldCell }, "a storage of \(old) has a cell other than the old storage's")
            #expect(!newCells.withLock { $0.contains(oldCell) }, "a storage of \(new) has the old storage's cell")
            let later = storage("k", atPath: old)
            later.wrappedValue = "made at the old path"
            later.flush()
            #expect(oldStorage.wrappedValue == "made at the old path")
            #expect(first.wrappedValue == "new default")
            #expect(storedString(atPath: old + "/k") == "made at the old path")
            #expect(storedString(atPath: new + "/k") == "new default")
        }
    }

    /// A symlink to the directory that took the removed one's inode is that directory: a storage opened through it
    /// shares the cell of the directory's storage, while the old storage, moved out of the way, keeps its own.
    @Test func aStorageOpenedThroughASymlinkToTheDirectoryThatTookTheInodeSharesItsCell() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = storage("k", atPath: new, default: "new default")
            #expect(newStorage.wrappedValue == "new default")
            newStorage.flush()
            let link = root.path + "/link"
            try #require(symlink(new, link) == 0)

            let throughLink = storage("k", atPath: link)
            #expect(throughLink.cell === newStorage.cell, "the storage of \(link) has a cell of its own")
            #expect(throughLink.cell !== oldStorage.cell, "the storage of \(link) is the one of \(old)")
            throughLink.wrappedValue = "through the link"
            #expect(newStorage.wrappedValue == "through the link")
            throughLink.flush()
            #expect(storedString(atPath: new + "/k") == "through the link")
            // The old storage may have seen its file go with its directory (its default) by now, not the link's value.
            #expect(oldStorage.wrappedValue != "through the link")
        }
    }

    /// A storage of another value type opened at the path made again is told of the old storage's type (the file's
    /// cell there), not of the new directory's.
    @Test func aStorageOfAnotherTypeAtThePathMadeAgainMeetsTheOldStoragesType() throws {
        try withTemporaryDirectory { root in
            let reused = try directoryReusingARemovedOnesInode(in: root)
            let (old, oldStorage, new) = (reused.oldPath, reused.oldStorage, reused.newPath)
            let newStorage = fileStorage("k", in: URL(fileURLWithPath: new, isDirectory: true), default: 7)
            #expect(newStorage.wrappedValue == 7)
            try makeDirectory(old)

            let typed = fileStorage("k", in: URL(fileURLWithPath: old, isDirectory: true), default: 1)
            #expect(typed.cell !== newStorage.cell, "the Int storage of \(old) is the one of \(new)")
            #expect(typed.lastError?.code == .typeMismatch, "the Int storage of \(old) did not meet the String one")
            let later = storage("k", atPath: old)
            #expect(later.cell === oldStorage.cell)
            #expect(later.lastError?.code != .typeMismatch)
        }
    }
}

/// Opens a storage of `k` at `path`, which moves any stale storage out of the way, and waits until it is let go of.
private func openAndLetGoOfAStorage(atPath path: String) throws {
    weak var cell: AnyObject?
    do {
        let opened = storage("k", atPath: path, default: "new default")
        #expect(opened.wrappedValue == "new default")
        opened.flush()
        cell = opened.cell
    }
    // A job that just ended may hold the cell a moment longer.
    try #require(eventually(timeout: 30) { cell == nil }, "the storage of \(path) is let go of")
}

/// A storage that a test lets go of on a thread of its choosing.
private final class Droppable: Sendable {
    private let storage: Lock<WLStorage<String>?>

    init(_ storage: WLStorage<String>) { self.storage = Lock(storage) }

    /// Lets go of the storage, after the lock.
    func drop() {
        let dropped = storage.withLock { $0.take() }
        _ = dropped
    }
}
