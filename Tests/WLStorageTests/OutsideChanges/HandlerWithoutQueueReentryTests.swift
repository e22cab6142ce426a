// What a handler of `onChange(queue: nil)` may do on each thread that delivers a change to it: set, update and flush
// the storage, flush every storage, open and let go of storages, subscribe again, cancel other handlers. Nothing
// deadlocks (a hang fails the test through `finishes(within:)` or a semaphore's timeout), and each thing is done.
import Dispatch
import Foundation
import Testing

@testable import WLStorage

/// Where the change that reaches the handler comes from, and so the thread it runs on.
enum ReentryDelivery: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// A set of this process: the setting thread.
    case localSet
    /// An update of a store that writes on condition: the updating thread, once the store took the update.
    case updateInAStore
    /// A set made by a handler of the same storage: a thread of the package.
    case setFromAnotherHandler
    /// A file replaced by another program: the queue of checks.
    case fileReplacedElsewhere
    /// A store's feed: the queue of checks.
    case storeFeed
    /// A custom backer's feed: the queue of checks.
    case customBackerFeed

    var testDescription: String { rawValue }
}

/// What the handler does from inside.
enum ReentryAction: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case setAndFlush
    case update
    case flushEveryStorage
    case openAndLetGoOfStorages
    case subscribeAgain

    var testDescription: String { rawValue }
}

/// One storage of key "k" fed by `delivery`, and the way to make a change reach it.
private struct Fixture: Sendable {
    let storage: HeldReference<WLStorage<Int>>
    /// Opens another storage of `key` with the same backing.
    let open: @Sendable (_ key: String) -> WLStorage<Int>
    /// What is stored for `key`, as a number.
    let stored: @Sendable (_ key: String) -> Int?
    /// Makes `value` reach the storage's handlers.
    let change: @Sendable (_ value: Int) throws -> Void
}

@Suite(.capturingOutput) struct HandlerWithoutQueueReentryTests {
    private static func fixture(_ delivery: ReentryDelivery, in directory: URL) throws -> Fixture {
        let memory = MemoryStore()
        let number: @Sendable (Data?) -> Int? = { data in data.flatMap { Int(String(decoding: $0, as: UTF8.self)) } }
        switch delivery {
        case .localSet, .updateInAStore, .setFromAnotherHandler, .storeFeed:
            let open: @Sendable (String) -> WLStorage<Int> = { key in
                WLStorage(key: key, defaultValue: 0, flushInterval: nil, store: memory)
            }
            let storage = HeldReference(open("k"))
            let change: @Sendable (Int) throws -> Void
            switch delivery {
            case .localSet:
                change = { value in storage.current?.wrappedValue = value }
            case .updateInAStore:
                change = { value in storage.current?.update { $0 = value } }
            case .setFromAnotherHandler:
                // A handler of the storage turns the change into the one asked for: made while the first is being
                // delivered, it is delivered on the package's queue.
                let relay = HeldReference<WLStorageSubscription>()
                relay.hold(
                    storage.current?.onChange(queue: nil) { value in
                        if value < 0 { storage.current?.wrappedValue = -value }
                    })
                change = { value in
                    _ = relay
                    storage.current?.wrappedValue = -value
                }
            default:
                change = { value in memory.writeFromOutside("k", json: String(value)) }
            }
            return Fixture(
                storage: storage, open: open, stored: { key in number(memory.stored(key).map { Data($0.utf8) }) },
                change: change)
        case .fileReplacedElsewhere:
            let open: @Sendable (String) -> WLStorage<Int> = { key in
                WLStorage(
                    defaultValueClosure: { 0 }, flushInterval: nil,
                    backer: WLStorageDefaultBacker(key: key, directory: directory))
            }
            let storage = HeldReference(open("k"))
            storage.current?.flush()
            return Fixture(
                storage: storage, open: open,
                stored: { key in number(try? Data(contentsOf: directory.appendingPathComponent(key))) },
                change: { value in try replaceFromOutside(directory.appendingPathComponent("k"), with: String(value)) })
        case .customBackerFeed:
            // The backer of "k" has a feed; another key is a storage of a store of its own.
            let backer = ObservableMemoryBacker(stored: 0)
            let others = MemoryStore()
            let open: @Sendable (String) -> WLStorage<Int> = { key in
                key == "k"
                    ? WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
                    : WLStorage(key: key, defaultValue: 0, flushInterval: nil, store: others)
            }
            return Fixture(
                storage: HeldReference(open("k")), open: open,
                stored: { key in key == "k" ? backer.stored : number(others.stored(key).map { Data($0.utf8) }) },
                change: { value in backer.setFromOutside(value) })
        }
    }

    /// The handler, called with 5 on the thread `delivery` gives it, does `action` there. Nothing deadlocks, and what
    /// it did is done: written, delivered, opened, subscribed.
    @Test(arguments: ReentryDelivery.allCases, ReentryAction.allCases)
    func aHandlerOnTheDeliveringThreadMayUseTheStorage(_ delivery: ReentryDelivery, _ action: ReentryAction) throws {
        try withTemporaryDirectory { directory in
            let fixture = try Self.fixture(delivery, in: directory)
            let storage = fixture.storage
            let cell = try #require(storage.current?.cell)
            let done = DispatchSemaphore(value: 0)
            // What the handler found: the value of another storage of its key, opened inside.
            let foundInside = HeldReference<Int>()
            // Subscriptions made inside, and what they were given.
            let inner = HeldReference<[WLStorageSubscription]>([])
            let innerValues = Lock<[Int]>([])
            let innerQueue = DispatchQueue(label: "HandlerWithoutQueueReentryTests.inner")
            let subscription = try #require(storage.current).onChange(queue: nil) { value in
                guard value == 5, let own = storage.current else { return }
                switch action {
                case .setAndFlush:
                    own.wrappedValue = 6
                    own.flush()
                case .update:
                    own.update { $0 += 10 }
                    own.flush()
                case .flushEveryStorage:
                    own.wrappedValue = 7
                    ShutdownHandling.flushEverything(only: { $0 === cell })
                case .openAndLetGoOfStorages:
                    let same = fixture.open("k")
                    foundInside.hold(same.wrappedValue)
                    let other = fixture.open("other")
                    other.wrappedValue = 3
                    other.flush()
                case .subscribeAgain:
                    // The relay's own changes (negative) are left out.
                    let record: @Sendable (Int) -> Void = { value in
                        if value > 0 { innerValues.withLock { $0.append(value) } }
                    }
                    inner.hold([own.onChange(queue: nil, record), own.onChange(queue: innerQueue, record)])
                }
                done.signal()
            }
            defer { subscription.cancel() }

            let changed = finishes(within: 30) {
                do { try fixture.change(5) } catch { Issue.record(error) }
            }
            try #require(changed, "the change did not return")
            try #require(done.wait(timeout: .now() + 30) == .success, "the handler did not finish")

            switch action {
            case .setAndFlush:
                #expect(fixture.stored("k") == 6)
                #expect(storage.current?.wrappedValue == 6)
            case .update:
                #expect(fixture.stored("k") == 15)
                #expect(storage.current?.wrappedValue == 15)
            case .flushEveryStorage:
                #expect(fixture.stored("k") == 7)
                #expect(storage.current?.hasPendingChanges == false)
            case .openAndLetGoOfStorages:
                #expect(foundInside.current == 5)
                #expect(fixture.stored("other") == 3)
            case .subscribeAgain:
                #expect(cell.listenerCount >= 3)
                // A later change reaches both handlers subscribed inside, and only that change.
                let again = finishes(within: 30) {
                    do { try fixture.change(8) } catch { Issue.record(error) }
                }
                try #require(again, "the second change did not return")
                #expect(
                    eventually(timeout: 30) { innerValues.withLock { $0 } == [8, 8] },
                    "delivered to the inner handlers: \(innerValues.withLock { $0 })")
                for held in inner.take() ?? [] { held.cancel() }
            }
            // Nothing of the storage hangs afterwards, and its value is written.
            #expect(finishes(within: 30) { storage.current?.flush() }, "a flush after the handler hangs")
            #expect(fixture.stored("k") == storage.current?.wrappedValue)
        }
    }

    /// A handler that cancels the other handlers of the storage: those cancelled are not called again, not even for
    /// the change being delivered, which reaches only the handlers still subscribed when their turn comes.
    @Test func aHandlerCancelledByAnotherIsNotCalledAfterItsCancel() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let handlers = 8
        let subscriptions = Lock<[Int: WLStorageSubscription]>([:])
        let called = Lock<[Int]>([])
        for index in 0..<handlers {
            let subscription = storage.onChange(queue: nil) { _ in
                called.withLock { $0.append(index) }
                // Cancels every other handler, each after its entry is taken out, so that none is cancelled twice.
                let others = subscriptions.withLock { held in
                    defer { held = held.filter { $0.key == index } }
                    return held.filter { $0.key != index }.map(\.value)
                }
                for other in others { other.cancel() }
            }
            subscriptions.withLock { $0[index] = subscription }
        }
        storage.wrappedValue = 1
        #expect(called.withLock { $0.count } == 1, "called: \(called.withLock { $0 })")
        #expect(storage.cell.listenerCount == 1)
        storage.wrappedValue = 2
        #expect(called.withLock { $0.count } == 2, "called: \(called.withLock { $0 })")
        for subscription in subscriptions.withLock({ $0.values }) { subscription.cancel() }
    }

    /// A handler held up on the thread of the set that called it holds up neither the write of that change (armed
    /// before the handler is called) nor a flush from another thread.
    @Test func aHandlerHeldUpOnTheSettingThreadHoldsUpNeitherTheWriteNorAFlush() throws {
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: 0, backer: backer)
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let subscription = storage.onChange(queue: nil) { value in
            guard value == 1 else { return }
            entered.signal()
            gate.wait()
        }
        defer { subscription.cancel() }
        Thread.detachNewThread { storage.wrappedValue = 1 }
        try #require(entered.wait(timeout: .now() + 30) == .success, "the handler was not called")
        #expect(eventually(timeout: 30) { backer.stored == 1 }, "the change waits for the handler to be written")
        storage.wrappedValue = 2
        #expect(finishes(within: 30) { storage.flush() }, "the flush waits for the handler")
        #expect(backer.stored == 2)
        gate.signal()
    }

    /// A handler of one storage held up on a thread of the package holds up no other storage's changes: a change of
    /// another storage left to a thread of the package (made while that storage's changes were being delivered)
    /// reaches its handlers meanwhile.
    @Test func aHandlerHeldUpOnAThreadOfThePackageHoldsUpNoOtherStorage() throws {
        // Storage A: its change to 2, made by a handler of its own, is delivered on a thread of the package, where
        // A's handler is held up.
        let a = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let aHeld = DispatchSemaphore(value: 0)
        let aGate = DispatchSemaphore(value: 0)
        let aSubscriptions = [
            a.onChange(queue: nil) { value in if value == 1 { a.wrappedValue = 2 } },
            a.onChange(queue: nil) { value in
                guard value == 2 else { return }
                aHeld.signal()
                aGate.wait()
            },
        ]
        defer { for subscription in aSubscriptions { subscription.cancel() } }
        a.wrappedValue = 1
        try #require(aHeld.wait(timeout: .now() + 30) == .success, "A's handler was not called")
        defer { aGate.signal() }

        // Storage B: a change made while another thread delivers B's first one is left to a thread of the package.
        let b = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let bIn = DispatchSemaphore(value: 0)
        let bGate = DispatchSemaphore(value: 0)
        let seen = Recorded()
        let bSubscriptions = [
            b.onChange(queue: nil) { value in
                guard value == 1 else { return }
                bIn.signal()
                bGate.wait()
            },
            b.onChange(queue: DispatchQueue(label: "HandlerWithoutQueueReentryTests.b")) { seen.append($0) },
        ]
        defer { for subscription in bSubscriptions { subscription.cancel() } }
        Thread.detachNewThread { b.wrappedValue = 1 }
        try #require(bIn.wait(timeout: .now() + 30) == .success, "B's handler was not called")
        b.wrappedValue = 2
        bGate.signal()
        #expect(eventually(timeout: 30) { seen.values == [1, 2] }, "B's handler got \(seen.values) while A's is held")
    }

    /// Threads set the storage while handlers set it too, cancel their own subscriptions and subscribe anew from
    /// inside: nothing deadlocks, each handler that stays gets each thread's changes in order and the last value, no
    /// cancelled handler stays registered, and the last value is written.
    @Test func threadsSetWhileHandlersSetCancelAndSubscribeAgain() throws {
        let backer = RecordingBacker<Int>(stored: 0)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: 0, backer: backer)
        let churn = Churn(storage)
        let steady = (0..<3).map { _ in Recorded() }
        let subscriptions = steady.map { received in
            storage.onChange(queue: nil) { value in received.append(value) }
        }
        for _ in 0..<2 { churn.subscribe() }
        let threads = 4
        let setsPerThread = 300
        let finished = finishes(within: 60) {
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for index in 1...setsPerThread { storage.wrappedValue = thread * 10_000 + index }
            }
        }
        try #require(finished, "the sets did not return")
        // The handlers' own sets may still be coming: what counts is the value the storage ends with.
        for (index, received) in steady.enumerated() {
            #expect(
                eventually(timeout: 30) { received.values.last == storage.wrappedValue },
                "handler \(index) ended with \(received.values.last ?? -1), the storage with \(storage.wrappedValue)")
            let values = received.values
            for thread in 0...Churn.thread {
                let own = values.filter { $0 / 10_000 == thread }
                #expect(zip(own, own.dropFirst()).allSatisfy { $0 < $1 }, "thread \(thread)'s changes out of order")
            }
        }
        #expect(churn.resubscriptions > 0, "no handler cancelled itself")
        #expect(eventually(timeout: 30) { storage.cell.listenerCount == steady.count + 2 })
        #expect(finishes(within: 30) { storage.flush() }, "the flush hangs")
        #expect(backer.stored == storage.wrappedValue)
        churn.cancelAll()
        for subscription in subscriptions { subscription.cancel() }
        #expect(storage.cell.listenerCount == 0)
    }
}

/// The values a handler was given.
private final class Recorded: Sendable {
    private let received = Lock<[Int]>([])
    func append(_ value: Int) { received.withLock { $0.append(value) } }
    var values: [Int] { received.withLock { $0 } }
}

/// Handlers that set the storage now and then, and every so often cancel their own subscription and subscribe a new
/// handler in its place, from inside.
private final class Churn: Sendable {
    /// The thread number of the changes the handlers make, as the test's setting threads number theirs.
    static let thread = 9
    private let storage: WLStorage<Int>
    private let held = Lock<(subscriptions: [Int: WLStorageSubscription], next: Int, calls: Int, sets: Int)>(
        ([:], 0, 0, 0))
    private let counter = Lock(0)

    init(_ storage: WLStorage<Int>) { self.storage = storage }

    var resubscriptions: Int { counter.withLock { $0 } }

    func subscribe() {
        let id = held.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
        let subscription = storage.onChange(queue: nil) { [self] _ in called(id) }
        held.withLock { $0.subscriptions[id] = subscription }
    }

    private func called(_ id: Int) {
        let (calls, sets) = held.withLock { state in
            state.calls += 1
            if state.calls % 7 == 0 { state.sets += 1 }
            return (state.calls, state.sets)
        }
        if calls % 7 == 0 { storage.wrappedValue = Self.thread * 10_000 + sets }
        guard calls % 50 == 0 else { return }
        let own = held.withLock { $0.subscriptions.removeValue(forKey: id) }
        guard let own else { return }
        own.cancel()
        counter.withLock { $0 += 1 }
        subscribe()
    }

    func cancelAll() {
        let all = held.withLock { state in
            defer { state.subscriptions = [:] }
            return Array(state.subscriptions.values)
        }
        for subscription in all { subscription.cancel() }
    }
}
