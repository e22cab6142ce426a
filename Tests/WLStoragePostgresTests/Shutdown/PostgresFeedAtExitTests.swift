import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

/// A program's change feed ends at exit, before the libraries it calls are torn down: a feed still connecting then
/// (its server restarting) aborted the program in libkrb5, which libpq calls at each connection, once its destructor
/// had run.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFeedAtExitTests {
    @Test func theFeedsConnectionIsClosedByTheExitHandlerBeforeTheProcessEnds() throws {
        let cluster = try PostgresCluster.shared()
        let replica = try Replica(url: cluster.url, namespace: uniqueNamespace())
        try replica.set(1)
        replica.send("flush")
        try #require(replica.waitFor("flushed"))
        // The writing connection, the feed's, and its watch's: all open once the feed listens.
        var before = 0
        let listening = eventually(timeout: 30) {
            let asked = replica.lines.filter { $0.hasPrefix("sockets ") }.count
            replica.send("sockets")
            guard eventually(timeout: 5, { replica.lines.filter { $0.hasPrefix("sockets ") }.count > asked }) else {
                return false
            }
            before = replica.lines.last { $0.hasPrefix("sockets ") }.flatMap { Int($0.dropFirst(8)) } ?? 0
            return before >= 2
        }
        try #require(listening, "\(replica.lines)")
        replica.send("exit")
        let end = replica.waitForExit(timeout: 60)
        #expect(end?.reason == .exit && end?.status == 0, "\(replica.printedErrors)")
        let atExit = replica.lines.last { $0.hasPrefix("sockets at exit ") }.flatMap { Int($0.dropFirst(16)) }
        // Nothing else closes a socket at exit before the test child's own handler runs.
        #expect(
            (atExit ?? before) < before,
            "open sockets: \(before) before the exit, \(atExit.map(String.init) ?? "?") after the package's handler")
    }
}
