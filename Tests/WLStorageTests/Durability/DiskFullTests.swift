import Foundation
import Testing

@testable import WLStorage

/// Whether this process may mount a tmpfs (root with the capability to mount).
private let canMountTmpfs: Bool = {
    guard getuid() == 0 else { return false }
    let point = NSTemporaryDirectory() + "/wlstorage-mount-probe-\(getpid())"
    guard mkdir(point, 0o700) == 0 else { return false }
    defer { rmdir(point) }
    guard mount("tmpfs", point, "tmpfs", 0, "size=64k") == 0 else { return false }
    umount2(point, Int32(MNT_DETACH))
    return true
}()

@Suite(.enabled(if: canMountTmpfs, "needs root and the right to mount a tmpfs"), .capturingOutput)
struct DiskFullTests {
    @Test func aWriteThatFailsForLackOfSpaceStaysPendingAndLandsOnceSpaceIsBack() throws {
        try withTemporaryDirectory { outer in
            let point = outer.appendingPathComponent("small").path
            try #require(mkdir(point, 0o700) == 0)
            try #require(mount("tmpfs", point, "tmpfs", 0, "size=64k") == 0)
            defer { umount2(point, Int32(MNT_DETACH)) }
            let directory = URL(fileURLWithPath: point).appendingPathComponent("store", isDirectory: true)

            let storage = fileStorage("big", in: directory, default: "", flushInterval: nil)
            storage.wrappedValue = "first"
            storage.flush()
            #expect(storage.lastError == nil)

            // Fill the file system to the last block.
            let filler = open(point + "/filler", O_WRONLY | O_CREAT, 0o600)
            try #require(filler >= 0)
            let block = [UInt8](repeating: 0, count: 4_096)
            while block.withUnsafeBytes({ write(filler, $0.baseAddress, $0.count) }) > 0 {}
            #expect(errno == ENOSPC)
            close(filler)

            let big = String(repeating: "x", count: 20_000)
            storage.wrappedValue = big
            storage.flush()
            #expect(storage.lastError?.code == .writeFailed)
            #expect(storage.lastError?.errno == ENOSPC)
            #expect(storage.hasPendingChanges)
            #expect(storage.wrappedValue == big)
            #expect(stored(String.self, key: "big", in: directory) == "first")
            #expect(entries(of: directory) == ["big"])

            // Space comes back: the next flush writes the value that was kept in memory.
            #expect(unlink(point + "/filler") == 0)
            storage.flush()
            #expect(storage.lastError == nil)
            #expect(!storage.hasPendingChanges)
            #expect(stored(String.self, key: "big", in: directory) == big)
            #expect(entries(of: directory) == ["big"])
        }
    }
}
