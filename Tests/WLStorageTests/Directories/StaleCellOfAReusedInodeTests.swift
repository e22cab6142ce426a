// A storage whose directory was removed while it lived, when a new directory elsewhere takes the removed one's inode,
// is moved out of the new directory's way; once its own path is made again, it is that path's storage again.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct StaleCellOfAReusedInodeTests {
    /// A directory is removed under a live storage, a new directory elsewhere gets its inode (a storage of the new one
    /// moves the old storage out of its way), and the old path is made again. The old storage follows its path: it
    /// reads another program's write there, its writes go there, and a storage opened there later shares its value.
    @Test func aStorageMovedOutOfAReusedInodesWayIsItsPathsStorageOnceThePathIsMadeAgain() throws {
        try withTemporaryDirectory { root in
            var reused = false
            for round in 0..<20 where !reused {
                let old = root.path + "/old\(round)"
                try makeDirectory(old)
                let oldStorage = storage("k", atPath: old)
                oldStorage.wrappedValue = "old value"
                oldStorage.flush()
                let inode = try #require(identity(ofPath: old))
                try FileManager.default.removeItem(atPath: old)
                let new = root.path + "/new\(round)"
                try makeDirectory(new)
                guard identity(ofPath: new).map({ $0 == inode }) == true else { continue }
                reused = true
                let newStorage = storage("k", atPath: new, default: "new default")
                #expect(newStorage.wrappedValue == "new default")

                try makeDirectory(old)
                try replaceFromOutside(URL(fileURLWithPath: old + "/k"), with: "\"outside\"")
                #expect(
                    eventually(timeout: 10) { oldStorage.wrappedValue == "outside" },
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
            if !reused { print("no inode was reused; the case did not arise") }
        }
    }
    /// A storage moved out of a new directory's way, with a set pending, is still one of every storage: a flush of
    /// every storage writes its set, at its own path.
    @Test func aStorageMovedOutOfAReusedInodesWayIsWrittenByAFlushOfEveryStorage() throws {
        try withTemporaryDirectory { root in
            var reused = false
            for round in 0..<20 where !reused {
                let old = root.path + "/old\(round)"
                try makeDirectory(old)
                let oldStorage = storage("k", atPath: old)
                oldStorage.wrappedValue = "old value"
                oldStorage.flush()
                let inode = try #require(identity(ofPath: old))
                try FileManager.default.removeItem(atPath: old)
                let new = root.path + "/new\(round)"
                try makeDirectory(new)
                guard identity(ofPath: new).map({ $0 == inode }) == true else { continue }
                reused = true
                let newStorage = storage("k", atPath: new, default: "new default")
                #expect(newStorage.wrappedValue == "new default")

                oldStorage.wrappedValue = "pending"
                #expect(oldStorage.hasPendingChanges)
                WLStorageSystem.flushAll()
                #expect(!oldStorage.hasPendingChanges)
                #expect(storedString(atPath: old + "/k") == "pending")
                #expect(storedString(atPath: new + "/k") == "new default")
            }
            if !reused { print("no inode was reused; the case did not arise") }
        }
    }
}
