import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// The etcd store's feed through a network that misbehaves (a ``TCPProxy`` between the store and the server): a watch
/// cut off misses nothing once it is back, and a member that stops answering is noticed and reported.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdNetworkTroubleTests {
    /// The watch is cut, and the member refuses connections while another program makes changes (twenty keys, one of
    /// them twice, one removed); the feed says meanwhile that it cannot watch. Once the member takes connections again,
    /// every change is reported, and the watch resumed where it stopped: it did not start anew (that would report
    /// ``WLStorageStoreChange/everything``).
    @Test func aWatchCutOffAndReconnectedMissesNoChange() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let proxy = try TCPProxy(to: server.clientPort)
            defer { proxy.stop() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [proxy.endpoint], namespace: namespace, timeout: .seconds(2))
            let elsewhere = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let feed = try FeedRecorder(store)
            defer { feed.cancel() }
            let storage = WLStorage(key: "c7", defaultValue: "", flushInterval: nil, store: store)
            try elsewhere.write(key: "before", data: bytes("1"))
            try #require(eventually(timeout: 60) { feed.reported.contains(.key("before")) }, "the watch hears")

            proxy.set(.refusing)
            proxy.cutAll()
            for index in 0..<20 {
                try elsewhere.write(key: "c\(index)", data: bytes("\"\(index)\""))
            }
            try elsewhere.write(key: "c7", data: bytes("\"again\""))
            try elsewhere.remove(key: "c3")
            // No change can have been heard: the member takes no connection. The watch that cannot be made is said.
            #expect(!feed.reported.contains(.key("c0")))
            #expect(
                eventually(timeout: 60) { store.changeFeedError?.message.contains("could not watch") == true },
                "\(String(describing: store.changeFeedError))")

            proxy.set(.forwarding)
            let keys = (0..<20).map { WLStorageStoreChange.key("c\($0)") }
            #expect(
                eventually(timeout: 60) {
                    let reported = feed.reported
                    return keys.allSatisfy(reported.contains)
                },
                "reported: \(feed.reported)")
            #expect(feed.everythingCount == 1, "the watch resumed rather than started anew: \(feed.reported)")
            #expect(eventually(timeout: 60) { store.changeFeedError == nil }, "the trouble is over once it watches")
            #expect(eventuallyHolds(storage, "again"))
        }
    }

    /// The member stops answering: the proxy keeps every connection open and forwards nothing, as a member that lost
    /// its disk or a network that drops packets does, without a word. The store's probe (every 2 s, its timeout) finds
    /// it within two intervals: the feed's error is set and reported to the error handler. Once the member answers
    /// again, the watch is made again, the error cleared, and a change made meanwhile reported.
    @Test func aMemberThatStopsAnsweringIsNoticedAndReported() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let proxy = try TCPProxy(to: server.clientPort)
            defer { proxy.stop() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [proxy.endpoint], namespace: namespace, timeout: .seconds(2))
            let elsewhere = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let feed = try FeedRecorder(store)
            defer { feed.cancel() }
            #expect(store.changeFeedError == nil)

            proxy.set(.holding)
            // Two probe intervals (the wait for the next probe, and the probe's own timeout), and a margin for a
            // loaded machine.
            let reported = {
                ReportedErrors.errors { $0.path == store.identity && $0.message.contains("stopped answering") }
            }
            #expect(
                eventually(timeout: 2 * 2 + 30) { store.changeFeedError != nil && !reported().isEmpty },
                "not noticed: \(String(describing: store.changeFeedError))")
            let error = try #require(reported().first)
            #expect(error.message.contains(proxy.endpoint), "\(error)")
            #expect(error.code == .readFailed)
            try elsewhere.write(key: "during", data: bytes("1"))

            proxy.set(.forwarding)
            #expect(eventually(timeout: 60) { store.changeFeedError == nil }, "the watch was not made again")
            #expect(eventually(timeout: 60) { feed.reported.contains(.key("during")) }, "\(feed.reported)")
        }
    }
}
