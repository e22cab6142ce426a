import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// A store released while its listener reconnects or a call runs.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresStoreReleaseTests: PostgresFaultSuite {
    @Test func aStoreReleasedWhileItsListenerReconnectsOrACallRuns() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        // Calls end within a second while the server is down; the first, which must succeed, is tried until it does.
        var store: WLStoragePostgresStore? = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(1))
        try #require(eventually(timeout: 60) { (try? store?.write(key: "k", data: bytes("1"))) != nil })
        let calls = Counter()
        let observation = store?.observeChanges { _ in calls.increment() }
        #expect(eventually(timeout: 30) { calls.count >= 1 })
        try cluster.stop(mode: .immediate)
        usleep(300_000)  // the listener is now waiting to reconnect
        // A call in flight on another thread holds the store; the test's reference goes.
        let inFlight = DispatchSemaphore(value: 0)
        let captured = store!
        store = nil
        Thread.detachNewThread {
            for _ in 0..<5 { _ = try? captured.read(key: "k") }
            inFlight.signal()
        }
        #expect(inFlight.wait(timeout: .now() + 60) == .success)
        try cluster.start()
        // The observation outlives the store: the listener reconnects and reports everything.
        #expect(eventually(timeout: 30) { calls.count >= 2 })
        observation?.cancel()
        usleep(200_000)
    }
}
