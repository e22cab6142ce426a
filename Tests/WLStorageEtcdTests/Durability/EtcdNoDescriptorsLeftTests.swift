import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A program with no file descriptor left (`EMFILE` from every socket): its store's read and write fail, saying why
/// (not only libcurl's "Couldn't connect to server"), and nothing is sent; once it has descriptors again, a storage
/// writes. The program is a child (`WLStorageEtcdTestChild --no-descriptors`): the limit is the process's.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdNoDescriptorsLeftTests {
    @Test func callsWithoutDescriptorsSayWhyAndAStorageWritesOnceThereAreSome() throws {
        let server = try EtcdServer.shared()
        let namespace = uniqueNamespace()
        // libdispatch ends a process that has no descriptor when its monitor of its threads looks (a trap in
        // `_dispatch_workq_monitor_pools`); the program keeps none for a few milliseconds, and runs again when that
        // happened all the same.
        var lines: [String] = []
        for _ in 0..<3 {
            let child = try ChildProcess(
                "WLStorageEtcdTestChild", ["--no-descriptors", server.endpoint, namespace, "k"],
                standardInput: FileHandle.nullDevice)
            let end = try #require(child.waitForExit(timeout: 120), "the program did not end")
            if end.reason == .uncaughtSignal && end.status == SIGILL { continue }
            #expect(end.reason == .exit && end.status == 0, "\(child.printedErrors)")
            lines = child.lines
            break
        }
        let read = try #require(lines.first { $0.hasPrefix("read ") }, "\(lines)")
        #expect(read.hasPrefix("read readFailed"), "\(read)")
        #expect(read.contains(server.endpoint) && read.contains("Too many open files"), "\(read)")
        let write = try #require(lines.first { $0.hasPrefix("write ") }, "\(lines)")
        #expect(write.hasPrefix("write writeFailed"), "\(write)")
        #expect(write.contains(server.endpoint) && write.contains("Too many open files"), "\(write)")
        #expect(lines.last == "written", "\(lines)")
        #expect(try rawEntry(in: server, namespace: namespace, key: "k")?.value == bytes("7"))
    }
}
