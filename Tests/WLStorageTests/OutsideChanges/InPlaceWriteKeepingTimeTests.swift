// A write in place by another program that keeps size and time is seen.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// The modification time of `url`, to the nanosecond.
private func modificationTime(of url: URL) throws -> timespec {
    var status = stat()
    try #require(lstat(url.path, &status) == 0)
    return status.st_mtim
}

@Suite(.capturingOutput) struct InPlaceWriteKeepingTimeTests {
    @Test func anOutsideWriteInPlaceWithTheSameSizeAndTimeIsNotTakenForTheStoragesOwn() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            let storage = fileStorage("k", in: directory, default: "", flushInterval: nil)
            storage.wrappedValue = "aaaa"
            storage.flush()
            try #require(stored(String.self, key: "k", in: directory) == "aaaa")
            let written = try modificationTime(of: file)

            // The same inode, the same length; the time is put back before the file is closed, so the close
            // (IN_CLOSE_WRITE) is seen only once the file looks untouched.
            let fd = open(file.path, O_WRONLY | O_TRUNC)
            try #require(fd >= 0)
            let bytes = Array("\"bbbb\"".utf8)
            #expect(write(fd, bytes, bytes.count) == bytes.count)
            let omit = (1 << 30) - 2  // UTIME_OMIT, a macro Swift does not import: leave the access time
            var times = [timespec(tv_sec: 0, tv_nsec: omit), written]
            #expect(futimens(fd, &times) == 0)
            close(fd)
            try #require(stored(String.self, key: "k", in: directory) == "bbbb")
            let now = try modificationTime(of: file)
            try #require(now.tv_sec == written.tv_sec && now.tv_nsec == written.tv_nsec)

            storage.cell.checkForExternalChange()
            #expect(storage.wrappedValue == "bbbb")
        }
    }
}
