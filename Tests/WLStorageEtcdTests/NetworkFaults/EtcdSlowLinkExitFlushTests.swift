import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A program that ends with values pending in etcd 10 ms away, whose link fails as the flush at exit sends them: every
/// value is in etcd once the program has ended, or, when the link went silent for good, reported by its key.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdSlowLinkExitFlushTests {
    enum Fault: String, CaseIterable {
        /// Every connection cut.
        case cut
        /// Nothing forwarded any more, connections kept open.
        case silence
        /// The member killed (`SIGKILL`) before the program ends, and started again once it has set its values: the flush
        /// at exit begins while the member is down. It gave up at once, with none of the values written and 10 s of the
        /// store's timeout left.
        case kill
    }

    @Test(arguments: Fault.allCases)
    func theFlushAtExitWritesEveryValueThroughALinkThatFailsDuringIt(fault: Fault) throws {
        let server = try EtcdServer.started()
        defer { server.remove() }
        let proxy = try TCPProxy(to: server.clientPort)
        defer { proxy.stop() }
        proxy.delay(.milliseconds(10))
        let namespace = uniqueNamespace()
        let input = Pipe()
        defer { try? input.fileHandleForWriting.close() }
        // The flush at exit bounded by 100 s, not 10 s: the store's timeout (10 s) bounds the batch.
        let child = try ChildProcess(
            "WLStorageEtcdExitChild", [proxy.endpoint, namespace, "200", "100"],
            standardInput: input.fileHandleForReading)
        defer { if child.process.end == nil { child.send(SIGKILL) } }
        try #require(child.waitFor("ready", timeout: 300), "\(child.printedErrors)")
        if fault == .kill { server.stop() }
        try input.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
        try #require(child.waitFor("set", timeout: 120), "\(child.printedErrors)")
        switch fault {
        case .cut: proxy.cutAll()
        case .silence: proxy.set(.holding)
        case .kill: try server.start()
        }
        let end = try #require(child.waitForExit(timeout: 200), "the program was still running after 200 s")
        #expect(end.reason == .exit && end.status == 0, "\(child.printedErrors)")
        let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
        let written = Set(
            try store.entries().filter { "k" + String(decoding: $0.value, as: UTF8.self) == $0.key }.map(\.key))
        let errors = child.printedErrors
        let lost = (0..<200).map { "k\($0)" }.filter { !written.contains($0) && !errors.contains("[key: \($0)]") }
        #expect(lost.isEmpty, "neither written nor reported: \(lost.prefix(20)); \(errors.prefix(2000))")
        if fault != .silence { #expect(written.count == 200, "\(errors.prefix(2000))") }
    }

    /// A program started while its only member is down cannot read its keys, so their changes are not written in a
    /// batch: each storage reads its key first, then writes, on its own. The member is started again once the program
    /// has set its values and ended: those reads and writes wait for it within the store's timeout, as a batch does.
    @Test(arguments: [1, 20])
    func theFlushAtExitReadsAndWritesKeysThatCouldNotBeReadOnceTheMemberIsBack(values: Int) throws {
        let server = try EtcdServer.started()
        defer { server.remove() }
        let namespace = uniqueNamespace()
        server.stop()
        let input = Pipe()
        defer { try? input.fileHandleForWriting.close() }
        let child = try ChildProcess(
            "WLStorageEtcdExitChild", [server.endpoint, namespace, String(values), "100"],
            standardInput: input.fileHandleForReading)
        defer { if child.process.end == nil { child.send(SIGKILL) } }
        try #require(child.waitFor("ready", timeout: 300), "\(child.printedErrors)")
        try input.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
        try #require(child.waitFor("set", timeout: 120), "\(child.printedErrors)")
        try server.start()
        let end = try #require(child.waitForExit(timeout: 200), "the program was still running after 200 s")
        #expect(end.reason == .exit && end.status == 0, "\(child.printedErrors)")
        let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
        let written = try store.entries().filter { "k" + String(decoding: $0.value, as: UTF8.self) == $0.key }.count
        #expect(written == values, "\(child.printedErrors.prefix(2000))")
    }
}
