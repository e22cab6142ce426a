import Dispatch
import Foundation
import Observation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStoragePostgres

/// What a program's code told of a change on the store's listening thread may do there: update and flush the storage,
/// flush every storage of the store, and let go of the last references to its storage, its subscription and its store
/// (whose listener is the thread it runs on). Nothing deadlocks, what it does is written, and the store's changes
/// are heard afterwards. For `onChange(queue: nil)`, and for the `onChange` closure of `withObservationTracking`.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresListenerThreadHandlerTests {

    enum Observer: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case handlerWithoutQueue
        case observationTracking
        var testDescription: String { rawValue }
    }

    enum Action: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case updateAndFlush
        case flushEveryStorageOfTheStore
        case setAndLetGoOfStorageSubscriptionAndStore
        var testDescription: String { rawValue }
    }

    private static func store(_ url: String, _ namespace: String) throws -> WLStoragePostgresStore {
        try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(10), adoptsNotifiedValues: true)
    }

    private static func stored(_ store: WLStoragePostgresStore, _ key: String) -> Int? {
        (try? store.read(key: key)).flatMap { $0 }.flatMap { Int(String(decoding: $0, as: UTF8.self)) }
    }

    @Test(arguments: Observer.allCases, Action.allCases)
    func aHandlerOnTheListeningThreadMayUseTheStorageAndLetGoOfTheStore(_ observer: Observer, _ action: Action)
        throws
    {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        // Another program's writes: a store with no storage, whose connection is not the replica's. (A storage of the
        // same store and key in this process would share the replica's cell, and call its handlers itself.)
        let outside = try Self.store(cluster.url, namespace)
        // The replica's store is held by its storage alone (and by the handler, through it).
        let (replica, storeIdentity) = try { () throws -> (HeldReference<WLStorage<Int>>, String) in
            let store = try Self.store(cluster.url, namespace)
            return (
                HeldReference(WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)), store.identity
            )
        }()
        // The listener listens once a first change reaches the replica.
        try outside.write(key: "k", data: bytes("1"))
        try #require(eventually(timeout: 30) { replica.current?.wrappedValue == 1 }, "the replica hears nothing")

        let subscription = HeldReference<WLStorageSubscription>()
        // The handler says how it was called: on the listener's thread (and then acts), or elsewhere.
        let handled = DispatchSemaphore(value: 0)
        let onTheListener = HeldReference<Bool>()
        let acted = HeldReference<Bool>()
        // Returns whether the handler is to be called again (it ran elsewhere than on the listener's thread).
        let act: @Sendable () -> Bool = {
            // The Observation framework calls a tracking's `onChange` again for a set made inside it: once is enough.
            guard acted.current == nil else { return false }
            // The queue the code runs on: the listener reads its socket inside a `sync` on a queue of its own.
            // The socket's watch: a thread of Foundation's own, reading inside a `sync` on the listener's queue. (Its
            // name cannot tell it: libdispatch names a thread after the queue it last ran a block of.)
            let stack = Thread.callStackSymbols
            let listening =
                stack.contains { $0.contains("$s10Foundation6ThreadC4main") }
                && stack.contains { $0.contains("$s8Dispatch0A5QueueC4sync") }
            onTheListener.hold(listening)
            // A change may also reach the storage through a check that runs elsewhere (the storage was busy with a job
            // when the notification came, and the job took the change): the test then sends another one.
            guard listening else {
                handled.signal()
                return true
            }
            acted.hold(true)
            guard let own = replica.current else { return false }
            switch action {
            case .updateAndFlush:
                own.update { $0 += 10 }
                own.flush()
            case .flushEveryStorageOfTheStore:
                own.wrappedValue = 7
                ShutdownHandling.flushEverything(only: { $0.storeKey?.store == storeIdentity })
            case .setAndLetGoOfStorageSubscriptionAndStore:
                own.wrappedValue = 9
                let (lastStorage, lastSubscription) = (replica.take(), subscription.take())
                _ = own
                _ = lastStorage
                _ = lastSubscription
            }
            handled.signal()
            return false
        }
        // The values the test sends to call the handler: 5, 105, 205…
        let isTrigger: @Sendable (Int?) -> Bool = { $0.map { $0 % 100 == 5 } ?? false }
        switch observer {
        case .handlerWithoutQueue:
            subscription.hold(
                try #require(replica.current).onChange(queue: nil) { value in
                    guard isTrigger(value) else { return }
                    _ = act()
                })
        case .observationTracking:
            // Tracked again after every change until the one the test waits for.
            @Sendable func track() {
                withObservationTracking {
                    _ = replica.current?.wrappedValue
                } onChange: {
                    guard isTrigger(replica.current?.wrappedValue) else { return track() }
                    if act() { track() }
                }
            }
            track()
        }

        var trigger = 5
        for attempt in 0..<10 {
            trigger = 5 + 100 * attempt
            try outside.write(key: "k", data: bytes(String(trigger)))
            try #require(handled.wait(timeout: .now() + 30) == .success, "the handler did not finish")
            if acted.current == true { break }
        }
        #expect(onTheListener.current == true, "not called on the listener's thread in 10 changes")

        let expected: Int =
            switch action {
            case .updateAndFlush: trigger + 10
            case .flushEveryStorageOfTheStore: 7
            case .setAndLetGoOfStorageSubscriptionAndStore: 9
            }
        // (The last storage may go as the handler returns, after it said it was done: its flush then writes.)
        #expect(
            eventually(timeout: 30) { Self.stored(outside, "k") == expected },
            "stored: \(Self.stored(outside, "k") ?? -1)")
        // The replica (or one opened anew, when it was let go of) still hears the store's changes.
        let later =
            try replica.current
            ?? WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: Self.store(cluster.url, namespace))
        #expect(later.wrappedValue == expected)
        try outside.write(key: "k", data: bytes("20"))
        #expect(eventually(timeout: 30) { later.wrappedValue == 20 }, "holds \(later.wrappedValue)")
        subscription.take()?.cancel()
    }
}
