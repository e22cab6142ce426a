import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Calls from many threads while the server crashes neither hang nor lose a write.
///
/// Each call is bounded by the store's timeout of 2 s. The test allows each call 10 timeouts, and every thread 60 s to
/// end its last call: a loaded machine, which only makes a call late, does not fail it; a call that outlasts its
/// timeout many times over, or never ends, does.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresServerCrashTests: PostgresFaultSuite {
    @Test func manyThreadsWhileTheServerCrashesNeitherHangNorLoseAWrite() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let timeout = Duration.seconds(2)
        let store = try WLStoragePostgresStore(url: cluster.url, timeout: timeout)
        // What the test itself reads at the end, from a server just recovered from a crash, may take long.
        let other = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(60))
        try store.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)
        let stop = StopFlag()
        let threads = 6
        /// The last value each thread saw stored, and the longest call.
        let lastStored = Shared([Int](repeating: -1, count: threads))
        let longest = Shared(Duration.zero)
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            Thread.detachNewThread {
                var index = 0
                while !stop.isSet {
                    let start = ContinuousClock.now
                    let key = "t\(thread)"
                    do {
                        switch index % 3 {
                        case 0:
                            try store.write(key: key, data: bytes("\(index)"))
                        case 1:
                            try store.write([
                                WLStorageStoreWrite(key: key, data: bytes("\(index)")),
                                WLStorageStoreWrite(key: key + "-batch", data: bytes("\(index)")),
                            ])
                        default:
                            _ = try store.read(key: key)
                        }
                        if index % 3 != 2 { lastStored.withLock { $0[thread] = index } }
                    } catch {}
                    let duration = start.duration(to: .now)
                    longest.withLock { $0 = max($0, duration) }
                    index += 1
                }
                group.leave()
            }
        }
        // From here on the listener's next `.everything` is its reconnection after the crash.
        feed.clear()
        usleep(300_000)
        try cluster.stop(mode: .immediate)
        usleep(500_000)
        try cluster.start()
        usleep(500_000)
        try cluster.restart(mode: .immediate)
        usleep(500_000)
        stop.set()
        #expect(group.wait(timeout: .now() + 60) == .success, "calls hung: a thread's last call did not end in 60 s")
        let slowest = longest.withLock { $0 }
        #expect(slowest < timeout * 10, "a call took \(slowest) with a timeout of \(timeout)")
        // Every write that returned is stored (or a later one).
        for (thread, stored) in lastStored.withLock({ $0 }).enumerated() where stored >= 0 {
            let value = try #require(try other.read(key: "t\(thread)"))
            let number = Int(String(decoding: value, as: UTF8.self)) ?? -1
            #expect(number >= stored, "thread \(thread): \(number) is stored, \(stored) was written")
        }
        #expect(feed.waitFor(.everything, timeout: 60), "the listener did not listen again after the crash")
        // The store works again (its first calls may still find the server recovering).
        #expect(eventually(timeout: 60) { (try? store.write(key: "end", data: bytes("1"))) != nil })
    }
}
