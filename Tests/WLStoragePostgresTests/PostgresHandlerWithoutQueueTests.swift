import Dispatch
import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

/// `onChange(queue: nil)` on a replica: another replica's set reaches the handler on the store's listening thread.
/// What a handler may do there (open a storage of the same store, let go of the last storage of its key and of its
/// own subscription) neither deadlocks the listener nor stops it hearing later changes.
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresHandlerWithoutQueueTests {
    /// A reference the handler lets go of.
    private final class Held<T: Sendable>: Sendable {
        private let value: Lock<T?>
        init(_ value: T?) { self.value = Lock(value) }
        var current: T? { value.withLock { $0 } }
        func hold(_ newValue: T) { value.withLock { $0 = newValue } }
        func take() -> T? {
            value.withLock { value in
                defer { value = nil }
                return value
            }
        }
    }

    private static func store(_ url: String, _ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10), adoptsNotifiedValues: true)
    }

    @Test func aHandlerOnTheListenersThreadOpensAndLetsGoOfStoragesOfItsStore() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let writer = WLStorage(
            key: "k", defaultValue: 0, flushInterval: 0, store: try Self.store(cluster.url, namespace))
        let replicaStore = try Self.store(cluster.url, namespace)
        let replica = Held(WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: replicaStore))
        // Another key of the same store, opened from inside the handler, and told of later changes.
        let opened = Held<WLStorage<Int>>(nil)
        let subscription = Held<WLStorageSubscription>(nil)
        let handled = DispatchSemaphore(value: 0)
        subscription.hold(
            try #require(replica.current).onChange(queue: nil) { value in
                guard value == 5 else { return }
                opened.hold(WLStorage(key: "other", defaultValue: -1, flushInterval: nil, store: replicaStore))
                let (lastStorage, lastSubscription) = (replica.take(), subscription.take())
                _ = lastStorage
                _ = lastSubscription
                handled.signal()
            })

        writer.wrappedValue = 5
        try #require(handled.wait(timeout: .now() + 30) == .success, "the handler was not called")
        let other = try #require(opened.current)
        #expect(other.wrappedValue == -1)
        // The listener still hears the store's changes: another replica's set of the key opened in the handler
        // reaches it.
        let otherWriter = WLStorage(
            key: "other", defaultValue: 0, flushInterval: 0, store: try Self.store(cluster.url, namespace))
        otherWriter.wrappedValue = 8
        #expect(eventually(timeout: 30) { other.wrappedValue == 8 }, "holds \(other.wrappedValue)")
        // A storage of the key let go of in the handler reads the row anew.
        let fresh = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: replicaStore)
        #expect(fresh.wrappedValue == 5)
    }
}
