// What is not a file at a key's name is left alone, and the value stays pending and reported until it is written.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct NotAFileAtTheNameTests {
    /// Another program puts a symlink (to a file holding valid JSON), a directory or a FIFO at the file's name. The
    /// storage neither follows nor reads it, never replaces it, and keeps its value pending.
    @Test(arguments: ["symlink", "directory", "fifo"])
    func somethingOtherThanAFileAtTheNameIsNeitherFollowedNorReplaced(kind: String) throws {
        try withTemporaryDirectory { directory in
            let watched = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            watched.wrappedValue = "mine"
            watched.flush()
            let file = directory.appendingPathComponent("k")
            let elsewhere = directory.appendingPathComponent("elsewhere.json")
            try Data("\"followed\"".utf8).write(to: elsewhere)
            let temporary = directory.appendingPathComponent("replacement")
            switch kind {
            case "symlink": try #require(symlink(elsewhere.path, temporary.path) == 0)
            case "directory": try makeDirectory(temporary.path)
            default: try #require(mkfifo(temporary.path, 0o600) == 0)
            }
            if kind == "directory" {
                try #require(unlink(file.path) == 0)
            }
            try #require(rename(temporary.path, file.path) == 0)
            usleep(300_000)  // to show that nothing is adopted
            #expect(watched.wrappedValue != "followed")
            watched.wrappedValue = "after"
            watched.flush()
            var status = stat()
            #expect(lstat(file.path, &status) == 0 && (status.st_mode & S_IFMT) != S_IFREG, "it was replaced")
            #expect(watched.hasPendingChanges)
            #expect(watched.lastError?.code == .notARegularFile)
            #expect(storedString(atPath: elsewhere.path) == "followed")
        }
    }

    /// Two spellings of one directory (a symlink) with two value types: the second is refused as a type mismatch
    /// and never writes the file (that holds). But its first flush "writes" to the discarding backer, which counts
    /// as a successful write: `lastError` goes back to `nil` and `hasPendingChanges` to `false`, so a program that
    /// checks them after `flush()` believes its value is on disk.
    @Test func aTypeMismatchStaysReportedAndPendingAfterAFlush() throws {
        try withTemporaryDirectory { root in
            let real = root.path + "/real"
            try makeDirectory(real)
            try #require(symlink(real, root.path + "/link") == 0)
            let text = storage("k", atPath: real, default: "text")
            text.flush()
            let number = fileStorage("k", in: URL(fileURLWithPath: root.path + "/link"), default: 7, flushInterval: nil)
            number.wrappedValue = 8
            try #require(number.lastError?.code == .typeMismatch)
            number.flush()
            #expect(number.lastError?.code == .typeMismatch, "the mismatch is forgotten after a flush")
            #expect(number.hasPendingChanges, "a value that is never written is not pending")
            #expect(storedString(atPath: real + "/k") == "text")
        }
    }
}
