// A file put back as it was at an earlier version: the storage's value follows the file.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct EarlierVersionRestoredTests {
    /// A backup tool keeps a hard link to the file the storage wrote; another program replaces the file, and the
    /// storage adopts its value; then the backup is renamed back into place: the very file the storage wrote, same
    /// inode, time and bytes. The file holds the storage's earlier value again, and so does the storage.
    @Test func theStoragesOwnEarlierWriteRestoredFromAHardLinkIsReadAgain() throws {
        try withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("data", isDirectory: true)
            let backups = root.appendingPathComponent("backups", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            try FileManager.default.createDirectory(at: backups, withIntermediateDirectories: false)
            let file = directory.appendingPathComponent("k")
            let backup = backups.appendingPathComponent("k")
            let storage = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            storage.wrappedValue = "mine"
            storage.flush()
            try #require(Glibc.link(file.path, backup.path) == 0)

            try replaceFromOutside(file, with: "\"theirs\"")
            try #require(eventually(timeout: 30) { storage.wrappedValue == "theirs" }, "holds \(storage.wrappedValue)")

            try #require(rename(backup.path, file.path) == 0)
            #expect(eventually(timeout: 30) { storage.wrappedValue == "mine" }, "holds \(storage.wrappedValue)")
            #expect(stored(String.self, key: "k", in: directory) == "mine")
            #expect(!storage.hasPendingChanges)
        }
    }
}
