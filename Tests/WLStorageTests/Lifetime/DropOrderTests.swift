// Every object a program holds on to a storage, released in every order, from outside and from inside its own
// handler or loop, with a change pending: nothing crashes or hangs, the last change reaches the file, and nothing
// is left registered (DESIGN.md, lock discipline: no user object is released under a package lock).
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

// MARK: - What a program holds

/// The values a case sets, each larger than the last, and the largest set so far: what the file must hold at the end.
private final class Values: Sendable {
    private let counter = Atomic<Int>(0)
    private let largest = Atomic<Int>(0)

    /// A value larger than every one drawn before.
    func next() -> Int { counter.add(1, ordering: .relaxed).newValue }

    /// Sets `value` through `storage`, and remembers it.
    func set(_ value: Int, through storage: WLStorage<Int>) {
        storage.wrappedValue = value
        _ = largest.max(value, ordering: .relaxed)
    }

    var lastSet: Int { largest.load(ordering: .relaxed) }
}

/// A model object as an app writes one: it owns a storage and follows it with an `onChange` handler that captures
/// the model itself, so the model lives as long as its subscription, whoever else lets it go.
private final class Model: Sendable {
    let storage: WLStorage<Int>
    private let subscription = Lock<WLStorageSubscription?>(nil)
    private let values: Values
    /// The change that makes the handler end the model, and the last change it makes then.
    private let stop = Lock<(at: Int, final: Int)?>(nil)
    private let gone: Flag

    init(storage: WLStorage<Int>, queue: DispatchQueue, values: Values, gone: Flag) {
        self.storage = storage
        self.values = values
        self.gone = gone
        let subscription = storage.onChange(queue: queue) { [self] value in handle(value) }
        self.subscription.withLock { $0 = subscription }
    }

    deinit {
        gone.set()
    }

    private func handle(_ value: Int) {
        let stop = self.stop.withLock { stop -> (at: Int, final: Int)? in
            guard let request = stop, value >= request.at else { return nil }
            stop = nil
            return request
        }
        guard let stop else { return }
        // From inside its own handler: a last change, then the subscription goes, and with it the handler's hold on
        // the model, whose storage may be the last one.
        values.set(stop.final, through: storage)
        close()
    }

    /// Has the handler end the model when it sees a change to `value` or later, with `final` as its last change.
    func stop(at value: Int, final: Int) {
        stop.withLock { $0 = (value, final) }
    }

    /// Cancels the model's subscription, which is released after the lock.
    func close() {
        let subscription = self.subscription.withLock { subscription in
            defer { subscription = nil }
            return subscription
        }
        subscription?.cancel()
    }
}

/// A task that consumes a storage's `values`, holding a storage of its own while it runs.
private final class Consumer: Sendable {
    private let storage: Holding<WLStorage<Int>>
    private let stop = Lock<(at: Int, final: Int)?>(nil)
    private let task = Lock<Task<Void, Never>?>(nil)

    init(storage: WLStorage<Int>, values: Values, finished: Occurrence) {
        self.storage = Holding(storage)
        let stream = storage.values
        let task = Task { [self] in
            for await value in stream {
                let stop = self.stop.withLock { stop -> (at: Int, final: Int)? in
                    guard let request = stop, value >= request.at else { return nil }
                    stop = nil
                    return request
                }
                guard let stop else { continue }
                // From inside the loop: a last change, then the loop's storage goes, maybe the last one, and then the
                // loop.
                let mine = self.storage.take()
                if let mine { values.set(stop.final, through: mine) }
                break
            }
            _ = self.storage.take()
            finished.happen()
        }
        self.task.withLock { $0 = task }
    }

    /// The storage the consumer holds, while it runs.
    var heldStorage: WLStorage<Int>? { storage.current }

    /// Has the loop end itself when it sees a change to `value` or later, with `final` as its last change.
    func stop(at value: Int, final: Int) {
        stop.withLock { $0 = (value, final) }
    }

    func cancel() {
        task.withLock { $0 }?.cancel()
    }
}

/// A weak reference to a cell, to tell when the last of its holders is gone.
private final class WeakCell: Sendable {
    weak let cell: StorageCell<Int>?

    init(_ cell: StorageCell<Int>) {
        self.cell = cell
    }
}

/// One reference the test or a handler holds, let go at its turn.
private final class Holding<T: Sendable>: Sendable {
    private let value: Lock<T?>

    init(_ value: T?) {
        self.value = Lock(value)
    }

    /// The value, still held.
    var current: T? { value.withLock { $0 } }

    /// Takes the value out, leaving nothing, so that it is released after the lock, by the caller.
    func take() -> T? {
        value.withLock { value in
            defer { value = nil }
            return value
        }
    }

    func hold(_ newValue: T) {
        value.withLock { $0 = newValue }
    }
}

/// A flag shared with a handler, a task or a thread.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// Runs `body` on a thread of its own, and waits for it without blocking a thread of the caller's: a release that
/// hangs fails the test rather than hang the run. Returns whether `body` returned within `timeout` seconds.
private func onThreadOfItsOwn(timeout: Double = 30, _ body: @escaping @Sendable () -> Void) async -> Bool {
    let done = Flag()
    let thread = Thread {
        body()
        done.set()
    }
    thread.start()
    return await settles(timeout: timeout) { done.isSet }
}

/// Polls `condition` every millisecond, without blocking a thread, until it holds or `timeout` seconds of patience
/// pass.
private func settles(timeout: Double = 30, _ condition: () -> Bool) async -> Bool {
    await waitUntil(timeout: timeout, every: .milliseconds(1), condition)
}

// MARK: - Orders

/// What the test holds on to, each let go at its turn.
enum Holder: String, Sendable, CaseIterable {
    /// A storage, held directly.
    case storage
    /// An `onChange(queue:)` subscription of that storage.
    case subscription
    /// A task that consumes `values`, with a storage of its own.
    case consumer
    /// A model that owns a storage, with a handler that captures the model.
    case model
}

/// One order of letting every holder go, and how each that can end in two ways ends.
struct DropOrder: Sendable, CustomTestStringConvertible {
    enum SubscriptionEnding: String, Sendable, CaseIterable {
        /// `cancel()`, then the last reference dropped.
        case cancelled
        /// The last reference dropped: its `deinit` cancels it.
        case dropped
    }

    enum ConsumerEnding: String, Sendable, CaseIterable {
        /// The task cancelled from outside; it lets its storage go when its loop ends.
        case cancelled
        /// The loop makes a last change, lets its storage go and breaks out, with its task never cancelled.
        case breaksOut = "breaks out"
    }

    enum ModelEnding: String, Sendable, CaseIterable {
        /// The test cancels the model's subscription and lets the model go.
        case closed
        /// The test lets the model go first; its handler then makes a last change and cancels its own subscription,
        /// which releases the model, and its storage, from the handler's queue.
        case fromItsHandler = "from its handler"
    }

    var order: [Holder]
    var subscription: SubscriptionEnding
    var consumer: ConsumerEnding
    var model: ModelEnding

    var testDescription: String {
        order.map { holder in
            switch holder {
            case .storage: "storage"
            case .subscription: "subscription (\(subscription.rawValue))"
            case .consumer: "consumer (\(consumer.rawValue))"
            case .model: "model (\(model.rawValue))"
            }
        }.joined(separator: ", ")
    }

    static func permutations(_ items: [Holder]) -> [[Holder]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { index in
            var rest = items
            let first = rest.remove(at: index)
            return permutations(rest).map { [first] + $0 }
        }
    }

    /// Every order, with every way of ending.
    static let all: [DropOrder] = permutations(Holder.allCases).flatMap { order in
        SubscriptionEnding.allCases.flatMap { subscription in
            ConsumerEnding.allCases.flatMap { consumer in
                ModelEnding.allCases.map { model in
                    DropOrder(order: order, subscription: subscription, consumer: consumer, model: model)
                }
            }
        }
    }
}

// MARK: - Tests

// The time limit catches a hang; it counts the wait for each test's turn too (see TestThreads.swift).
@Suite(.capturingOutput, .timeLimit(.minutes(30))) struct DropOrderTests {
    static let key = "key"

    @Test(arguments: DropOrder.all)
    func lettingGoOfEverythingInAnyOrderWritesTheLastChangeAndLeavesNothingRegistered(_ drop: DropOrder) async throws {
        try await withTemporaryDirectory { directory in
            try Data("0".utf8).write(to: directory.appendingPathComponent(Self.key))
            let values = Values()
            let queue = DispatchQueue(label: "DropOrderTests.handlers")
            let consumerFinished = Occurrence()
            let modelGone = Flag()

            let storage = Holding(fileStorage(Self.key, in: directory, default: -1, flushInterval: nil))
            let cell = try WeakCell(#require(storage.current?.cell))
            let subscription = Holding(storage.current?.onChange(queue: queue) { _ in })
            let consumer = Holding(
                Consumer(
                    storage: fileStorage(Self.key, in: directory, default: -1, flushInterval: nil), values: values,
                    finished: consumerFinished))
            let model = Holding(
                Model(
                    storage: fileStorage(Self.key, in: directory, default: -1, flushInterval: nil), queue: queue,
                    values: values, gone: modelGone))
            #expect(cell.cell?.listenerCount == 3)

            for holder in drop.order {
                // A change pending at every release, the last one included (the flush interval is nil).
                if let live = storage.current ?? model.current?.storage ?? consumer.current?.heldStorage {
                    values.set(values.next(), through: live)
                }

                let step: Comment = "letting go of the \(holder) in \(drop.testDescription)"
                switch holder {
                case .storage:
                    let returned = await onThreadOfItsOwn { _ = storage.take() }
                    try #require(returned, "hung \(step)")
                case .subscription:
                    let ending = drop.subscription
                    let returned = await onThreadOfItsOwn {
                        let mine = subscription.take()
                        if ending == .cancelled { mine?.cancel() }
                    }
                    try #require(returned, "hung \(step)")
                case .consumer:
                    let (poke, final) = (values.next(), values.next())
                    let ending = drop.consumer
                    let returned = await onThreadOfItsOwn {
                        let mine = consumer.take()
                        if ending == .cancelled {
                            mine?.cancel()
                        } else {
                            mine?.stop(at: poke, final: final)
                        }
                    }
                    try #require(returned, "hung \(step)")
                    // The loop waits for a change; with no storage of the test's left, it comes through the cell.
                    if ending == .breaksOut { cell.cell?.set(poke) }
                    // A task of the pool, which a busy machine may run late: waited for, not polled.
                    await consumerFinished.wait()
                case .model:
                    let (poke, final) = (values.next(), values.next())
                    let ending = drop.model
                    let returned = await onThreadOfItsOwn {
                        let mine = model.take()
                        if ending == .closed {
                            mine?.close()
                        } else {
                            mine?.stop(at: poke, final: final)
                        }
                    }
                    try #require(returned, "hung \(step)")
                    if ending == .fromItsHandler { cell.cell?.set(poke) }
                    try #require(await settles { modelGone.isSet }, "hung \(step)")
                }
            }

            // Nothing holds the cell any more: no storage, listener, handler or task is left.
            try #require(await settles { cell.cell == nil }, "the cell outlived every holder: something still holds it")
            #expect(stored(Int.self, key: Self.key, in: directory) == values.lastSet)
            #expect(temporaryFiles(in: directory).isEmpty)
            let fresh = fileStorage(Self.key, in: directory, default: -1, flushInterval: nil)
            #expect(fresh.wrappedValue == values.lastSet)
            #expect(fresh.cell.listenerCount == 0)
            #expect(!fresh.hasPendingChanges)
        }
    }

    /// The handler holds the last references to the storage and to its own subscription, and lets both go when it sees
    /// a change: the storage's deinit flushes on the handler's queue.
    @Test(arguments: DropOrder.SubscriptionEnding.allCases)
    func aHandlerThatEndsItsOwnSubscriptionAndDropsTheLastStorageWritesThePendingChange(
        ending: DropOrder.SubscriptionEnding
    ) async throws {
        try await withTemporaryDirectory { directory in
            let storage = Holding(fileStorage(Self.key, in: directory, default: 0, flushInterval: nil))
            let subscription = Holding<WLStorageSubscription>(nil)
            let cell = try WeakCell(#require(storage.current?.cell))
            let handled = Flag()
            let queue = DispatchQueue(label: "DropOrderTests.handler")
            // Held by the holding only: a local would keep the subscription alive to the end of the test.
            subscription.hold(
                try #require(
                    storage.current?.onChange(queue: queue) { value in
                        guard value == 7 else { return }
                        let mine = subscription.take()
                        if ending == .cancelled { mine?.cancel() }
                        _ = storage.take()
                        handled.set()
                    }))
            // The change that calls the handler is the one pending when the handler drops the last storage.
            storage.current?.wrappedValue = 7
            try #require(await settles { handled.isSet }, "the handler never ran")
            try #require(await settles { cell.cell == nil }, "the cell outlived the storage and the subscription")
            #expect(stored(Int.self, key: Self.key, in: directory) == 7)
            let fresh = fileStorage(Self.key, in: directory, default: 0, flushInterval: nil)
            #expect(fresh.wrappedValue == 7)
            #expect(fresh.cell.listenerCount == 0)
        }
    }

    /// The task holds the last storage; its loop makes a change, drops the storage, whose deinit flushes on the task's
    /// thread, and breaks out, which ends the stream.
    @Test func aValuesLoopThatDropsTheLastStorageAndBreaksOutWritesThePendingChange() async throws {
        try await withTemporaryDirectory { directory in
            let held = Holding(fileStorage(Self.key, in: directory, default: 0, flushInterval: nil))
            let cell = try WeakCell(#require(held.current?.cell))
            let task = Task {
                // The stream lives in the task only, so that breaking out of the loop ends it.
                guard let stream = held.current?.values else { return }
                for await value in stream {
                    let mine = held.take()
                    mine?.wrappedValue = value + 7
                    break
                }
            }
            // A task of the pool, which a busy machine may run late: waited for, not polled.
            await task.value
            let ended = await settles { held.current == nil && cell.cell == nil }
            try #require(ended, "the loop's storage, or its listener, outlived the loop")
            #expect(stored(Int.self, key: Self.key, in: directory) == 7)
            let fresh = fileStorage(Self.key, in: directory, default: 0, flushInterval: nil)
            #expect(fresh.wrappedValue == 7)
            #expect(fresh.cell.listenerCount == 0)
        }
    }
}
