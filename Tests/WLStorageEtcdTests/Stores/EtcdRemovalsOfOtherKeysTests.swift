import Foundation
import Synchronization
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Writes where nothing is stored, over a slow link (100 ms a round trip, as between regions), while another program
/// removes other keys of the namespace every 10 ms or so: each of their tries is fenced at a revision some removal is
/// always later than. A removal of another key must not refuse them: a write on condition of nothing stored would be
/// reported as finding something stored.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdRemovalsOfOtherKeysTests {
    @Test func writesWhereNothingIsStoredAreNotRefusedByRemovalsOfOtherKeys() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let slow = try TCPProxy(to: server.clientPort)
            defer { slow.stop() }
            slow.delay(.milliseconds(50))
            let store = try WLStorageEtcdStore(endpoints: [slow.endpoint], namespace: namespace)
            let written = ["created", "made", "updated", "set", "batched-1", "batched-2"]
            // Keys in other buckets than those written: their removals never say anything of the keys written.
            let removed = (0..<1000).map { "other-\($0)" }.filter { key in
                !written.contains { removalsBucket(of: $0) == removalsBucket(of: key) }
            }.prefix(4)
            let stop = Atomic<Bool>(false)
            let removals = Atomic<Int>(0)
            let stopped = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                defer { stopped.signal() }
                guard let other = try? WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
                else { return }
                while !stop.load(ordering: .relaxed) {
                    for key in removed {
                        try? other.write(key: key, data: bytes("1"))
                        try? other.remove(key: key)
                        removals.add(1, ordering: .relaxed)
                    }
                    usleep(10_000)
                }
            }
            defer {
                stop.store(true, ordering: .relaxed)
                stopped.wait()
            }
            try #require(eventually(timeout: 30) { removals.load(ordering: .relaxed) >= 8 }, "no removal was made")

            #expect(try store.write(key: "created", data: bytes("1"), ifItHolds: nil), "refused, nothing stored")
            #expect(try store.create(key: "made", data: bytes("1")), "refused, nothing stored")
            let update = try store.write(key: "updated", data: bytes("1"), ifVersion: nil, tag: .init(text: "t"))
            if case .stored = update {} else { Issue.record("the update's write was not stored: \(update)") }
            let batch = try store.write(
                [WLStorageStoreWrite(key: "batched-1", data: bytes("1")), .init(key: "batched-2", data: bytes("1"))],
                ifTheyHold: [nil, nil])
            #expect(batch == [true, true], "a batch on condition of nothing stored")
            // A storage's first value, where nothing is stored: written on condition of nothing stored.
            let storage = WLStorage(key: "set", defaultValue: 0, flushInterval: nil, store: store)
            storage.wrappedValue = 5
            storage.flush()
            #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
            #expect(removals.load(ordering: .relaxed) >= 16, "the removals went on meanwhile")
            #expect(try store.read(keys: written) == written.map { bytes($0 == "set" ? "5" : "1") })
        }
    }
}
