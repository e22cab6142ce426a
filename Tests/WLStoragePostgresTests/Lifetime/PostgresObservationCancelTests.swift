import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Observations cancelled from their own handler, or from many threads while notifications stream.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresObservationCancelTests: PostgresFaultSuite {
    /// A handler that cancels its own observation must not be called again: here it still receives every other change
    /// delivered in the same read (`deliver` works on a copy of the handlers taken before the loop).
    @Test func aHandlerThatCancelsItsObservationIsNotCalledAgain() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)  // keeps the listener up after the cancelled one
        let box = ObservationBox()
        let afterCancel = Counter()
        let keys = Counter()
        let everything = Counter()
        let observation = store.observeChanges { change in
            guard case .key = change else { return }
            keys.increment()
            if let observation = box.observation.withLock({ $0 }) {
                observation.cancel()
                box.observation.withLock { $0 = nil }
            } else {
                afterCancel.increment()
            }
        }
        _ = everything
        box.observation.withLock { $0 = observation }
        // One transaction: its notifications arrive together, and are delivered in one go.
        try other.write((0..<20).map { WLStorageStoreWrite(key: "k\($0)", data: bytes("v")) })
        #expect(feed.waitFor(.key("k19")))
        usleep(200_000)
        #expect(keys.count >= 1)
        #expect(afterCancel.count == 0, "the handler was called \(afterCancel.count) times after it cancelled")
    }

    @Test func observationsCancelledFromManyThreadsWhileNotificationsStream() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))
        let stop = StopFlag()
        let writer = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var index = 0
            while !stop.isSet {
                try? other.write(key: "k\(index % 10)", data: bytes("\(index)"))
                index += 1
            }
            writer.signal()
        }
        for _ in 0..<20 {
            let calls = Counter()
            let observation = try #require(store.observeChanges { _ in calls.increment() })
            usleep(UInt32.random(in: 0..<20_000))
            #expect(
                Self.completes(within: 60) {
                    DispatchQueue.concurrentPerform(iterations: 4) { _ in observation.cancel() }
                })
        }
        // Still works afterwards.
        let feed = try FeedRecorder(store)
        #expect(feed.waitFor(.key("k1")) || feed.waitFor(.key("k2")))
        stop.set()
        #expect(writer.wait(timeout: .now() + 60) == .success)
    }
}
