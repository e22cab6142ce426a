import Foundation
import Testing
@testable import WLStorage
@testable import WLStorageFiles

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
