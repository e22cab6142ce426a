import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// What the flush at exit keeps of a program whose values live in etcd: every one of a thousand values pending.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdExitFlushTests {
    /// How a program ends: it returns from its main code, or the package's flush on SIGTERM ends it by the signal.
    enum Ending: String, CaseIterable, CustomTestStringConvertible {
        case returnFromMain, sigterm
        var testDescription: String { rawValue }
    }

    /// The keys of `store` whose value is the number its key names (`kN` holds `N`).
    private static func keysHoldingTheirNumber(_ store: WLStorageEtcdStore) throws -> Int {
        try store.entries().filter { "k" + String(decoding: $0.value, as: UTF8.self) == $0.key }.count
    }

    /// A program sets a thousand storages of an etcd store, each to a value of its own, and ends at once: every value
    /// is in etcd afterwards, written by the flush at exit within its budget (the default, 10 s; the flush reports
    /// what it could not write when it runs out).
    @Test(arguments: Ending.allCases)
    func aProgramThatEndsWithAThousandValuesPendingWritesEveryOne(ending: Ending) throws {
        // A server of its own: a thousand creations and a batch of a thousand writes would slow the shared server's
        // answers to the other tests, where an answer that does not come in time is a write of unknown outcome.
        let server = try EtcdServer.started()
        defer { server.remove() }
        let namespace = uniqueNamespace()
        let input = Pipe()
        defer { try? input.fileHandleForWriting.close() }
        let child = try ChildProcess(
            "WLStorageEtcdExitChild", [server.endpoint, namespace, "1000"], standardInput: input.fileHandleForReading)
        defer { if child.process.end == nil { child.send(SIGKILL) } }
        // Each storage saves its default where nothing is stored: a thousand transactions, each a write to etcd's log,
        // which a loaded disk can make take minutes.
        try #require(child.waitFor("ready", timeout: 300), "\(child.printedErrors)")
        try input.fileHandleForWriting.write(contentsOf: Data((ending == .sigterm ? "hold\n" : "go\n").utf8))
        try #require(child.waitFor("set", timeout: 120), "\(child.printedErrors)")
        if ending == .sigterm { child.send(SIGTERM) }
        let end = try #require(child.waitForExit(timeout: 120), "the program was still running after 120 s")
        switch ending {
        case .returnFromMain: #expect(end.reason == .exit && end.status == 0, "\(child.printedErrors)")
        case .sigterm: #expect(end.reason == .uncaughtSignal && end.status == SIGTERM, "\(child.printedErrors)")
        }
        #expect(!child.printedErrors.contains("ran out of time"), "\(child.printedErrors)")
        let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
        #expect(try Self.keysHoldingTheirNumber(store) == 1000, "\(child.printedErrors)")
    }
}
