import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Programs whose server is 10 ms away behind a link that resets its connections, stops forwarding on them without a
/// word, or whose server crashes: what they acknowledged, and what they had pending at exit, is in the table, once.
/// Each test has a server of its own.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun && LatencyProxy.isAvailable, PostgresCluster.skipReason))
struct PostgresSlowLinkTests {
    enum Fault: String, CaseIterable {
        case cut, freeze, crash
    }

    private static func inflict(_ fault: Fault, on proxy: LatencyProxy, _ cluster: PostgresCluster) throws {
        switch fault {
        case .cut: try proxy.cut()
        case .freeze: try proxy.freeze()
        case .crash: try cluster.restart(mode: .immediate)
        }
    }

    /// Three programs append ids to one list with `update`; each fault once every program has had ten more updates
    /// acknowledged: each update that returned with no error is in the row exactly once.
    @Test func everyAcknowledgedUpdateIsInTheRowOnceThroughALinkThatIsCutSilencedAndRestarted() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        try proxy.delay(milliseconds: 10)
        let namespace = uniqueNamespace()
        let programs = try AppendingPrograms(
            url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres", namespace: namespace)
        programs.go()
        for fault in [Fault.cut, .freeze, .crash, .cut, .freeze] {
            try #require(programs.progress(), "the programs stopped making progress: \(programs.errors)")
            try Self.inflict(fault, on: proxy, cluster)
        }
        try #require(programs.progress(), "the programs stopped making progress: \(programs.errors)")
        programs.stop()
        try programs.expectEveryAcknowledgedUpdateExactlyOnce(url: cluster.url, namespace: namespace)
    }

    /// A program exits with 1,000 values pending; the fault comes as the flush at exit sends them (a store timeout of
    /// 10 s, the flush bounded by 100 s): every value is in the table once the program has ended, or, when the link
    /// went silent under the batch (which then takes the store's whole timeout), reported by its key. (With 3 s, a
    /// loaded machine had a call wait out its timeout behind the batch's resend.)
    @Test(arguments: Fault.allCases)
    func theFlushAtExitWritesEveryValueThroughALinkThatFailsDuringIt(fault: Fault) throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let proxy = try LatencyProxy(to: cluster.socketPath)
        let namespace = uniqueNamespace()
        let url = "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres"
        // The delay once the program is ready: its thousand storages each read their key first.
        let child = try Replica(arguments: ["--pending", url, namespace, "1", "1000", "10", "100"])
        try proxy.delay(milliseconds: 10)
        child.send("go")
        #expect(child.waitFor("set"))
        try Self.inflict(fault, on: proxy, cluster)
        let end = child.waitForExit(timeout: 200)
        #expect(end?.reason == .exit && end?.status == 0, "\(child.printedErrors)")
        let admin = try adminConnection(cluster.url)
        defer { admin.close() }
        let rows = try admin.query(
            "SELECT key FROM wlstorage WHERE namespace = $1 AND convert_from(value, 'UTF8') = substr(key, 2)",
            [.text(namespace)], deadline: .now + .seconds(30))
        let written = Set(rows.compactMap { $0.first ?? nil }.map { String(decoding: $0, as: UTF8.self) })
        let errors = child.printedErrors
        let lost = (0..<1000).map { "k\($0)" }.filter { !written.contains($0) && !errors.contains("[key: \($0)]") }
        #expect(lost.isEmpty, "neither written nor reported: \(lost.prefix(20)); \(errors.prefix(2000))")
        if fault != .freeze { #expect(written.count == 1000, "\(errors.prefix(2000))") }
    }
}
