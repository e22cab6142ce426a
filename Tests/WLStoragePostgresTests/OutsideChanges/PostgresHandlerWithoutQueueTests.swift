import Dispatch
import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// `onChange(queue: nil)` on a replica: another replica's set reaches the handler on the store's listening thread.
/// What a handler may do there (open a storage of the same store, let go of the last storage of its key and of its
/// own subscription) neither deadlocks the listener nor stops it hearing later changes.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresHandlerWithoutQueueTests {

    private static func store(_ url: String, _ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10), adoptsNotifiedValues: true)
    }

    @Test func aHandlerOnTheListenersThreadOpensAndLetsGoOfStoragesOfItsStore() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        // Another program's writes: a store with no storage. (A storage of the same store and key in this process
        // would share the replica's cell, and call its handlers on its own setting thread.)
        let outside = try Self.store(cluster.url, namespace)
        let replicaStore = try Self.store(cluster.url, namespace)
        let replica = HeldReference(WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: replicaStore))
        // Another key of the same store, opened from inside the handler, and told of later changes.
        let opened = HeldReference<WLStorage<Int>>(nil)
        // The listener listens once a first change reaches the replica.
        try outside.write(key: "k", data: Data("1".utf8))
        try #require(eventually(timeout: 30) { replica.current?.wrappedValue == 1 }, "the replica hears nothing")
        let subscription = HeldReference<WLStorageSubscription>(nil)
        let handled = DispatchSemaphore(value: 0)
        let handledValue = HeldReference<Int>(nil)
        subscription.hold(
            try #require(replica.current).onChange(queue: nil) { value in
                // The socket's watch: a thread of Foundation's own, reading inside a `sync` on the listener's queue. A
                // change that came while the cell was busy (a check of a loaded machine) is delivered by that job.
                let stack = Thread.callStackSymbols
                guard value >= 5, stack.contains(where: { $0.contains("$s10Foundation6ThreadC4main") }),
                    stack.contains(where: { $0.contains("$s8Dispatch0A5QueueC4sync") })
                else { return }
                handledValue.hold(value)
                opened.hold(WLStorage(key: "other", defaultValue: -1, flushInterval: nil, store: replicaStore))
                let (lastStorage, lastSubscription) = (replica.take(), subscription.take())
                _ = lastStorage
                _ = lastSubscription
                handled.signal()
            })

        // Changes until one reaches the handler on the listener's thread.
        var onTheListener = false
        for value in 5..<25 where !onTheListener {
            try outside.write(key: "k", data: Data(String(value).utf8))
            onTheListener = handled.wait(timeout: .now() + 15) == .success
        }
        try #require(onTheListener, "the handler was not called on the listener's thread")
        let value = try #require(handledValue.current)
        let other = try #require(opened.current)
        #expect(other.wrappedValue == -1)
        // The listener still hears the store's changes: another program's write of the key opened in the handler
        // reaches it.
        try outside.write(key: "other", data: Data("8".utf8))
        #expect(eventually(timeout: 30) { other.wrappedValue == 8 }, "holds \(other.wrappedValue)")
        // A storage of the key let go of in the handler reads the row anew.
        let fresh = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: replicaStore)
        #expect(fresh.wrappedValue == value)
    }
}
