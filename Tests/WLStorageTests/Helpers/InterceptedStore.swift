// A store that writes on condition over a memory store, and lets a test act at one chosen point of its next call: to
// order a check, a write and another program's change exactly as a test needs them.
import Dispatch
import Foundation

@testable import WLStorage

/// A store that writes on condition, over a ``MemoryStore``, whose next call of a kind a test can intercept, once: a
/// read held at a gate before or after it reads, a hook run after a plain write, a hook run before a write on
/// condition, and a hook run after a write on condition that stored, whose outcome can then be lost (it stored, but
/// the caller gets an error, as when a connection drops after the commit).
///
/// Made over a memory store of its own, it has that store's identity; made over a memory store given, it has an
/// identity of its own, as another handle of the same values.
final class InterceptedStore: WLStorageConditionalStore {
    /// Where the changes its observers are told of come from.
    enum Feed: Sendable {
        /// The memory store's feed.
        case base
        /// Only what the test announces with ``announce(_:)``.
        case announced
    }

    /// The error of a write on condition that stored, when its outcome is lost.
    struct LostOutcome: Error {}

    private struct Interceptions {
        var holdBeforeReading: (entered: DispatchSemaphore, open: DispatchSemaphore)?
        var holdAfterReading: (reached: DispatchSemaphore, release: DispatchSemaphore)?
        var afterWrite: (@Sendable () -> Void)?
        var beforeConditionalWrite: (@Sendable () throws -> Void)?
        var afterCreate: (@Sendable (String) -> Void)?
        var afterConditionalWrite: (body: @Sendable () -> Void, losingTheOutcome: Bool)?
        var announced: (@Sendable (WLStorageStoreChange) -> Void)?
    }

    let base: MemoryStore
    let identity: String
    private let feed: Feed
    private let interceptions = Lock(Interceptions())

    /// A store over a memory store of its own, with that store's identity.
    init(feed: Feed = .base) {
        base = MemoryStore()
        identity = base.identity
        self.feed = feed
    }

    /// A store over the values of `base`, with an identity of its own.
    init(_ base: MemoryStore, feed: Feed = .base) {
        self.base = base
        identity = "intercepted:" + UUID().uuidString
        self.feed = feed
    }

    // MARK: What the test intercepts

    /// Holds the next read at a gate before it reads: `entered` is signalled when it gets there, and it goes on once
    /// `open` is.
    func holdNextRead() -> (entered: DispatchSemaphore, open: DispatchSemaphore) {
        let gate = (entered: DispatchSemaphore(value: 0), open: DispatchSemaphore(value: 0))
        interceptions.withLock { $0.holdBeforeReading = gate }
        return gate
    }

    /// Holds the next read once it has read, until `release` is signalled; the semaphore returned is signalled once
    /// the read is held.
    func holdNextRead(afterReadingUntil release: DispatchSemaphore) -> DispatchSemaphore {
        let reached = DispatchSemaphore(value: 0)
        interceptions.withLock { $0.holdAfterReading = (reached, release) }
        return reached
    }

    /// Runs `body` once, right after the next plain write (of one key or a batch) has stored, before it returns.
    func afterNextWrite(_ body: @escaping @Sendable () -> Void) {
        interceptions.withLock { $0.afterWrite = body }
    }

    /// Runs `body` once, right after the next create (whether it stored or not), with the key created, before it
    /// returns.
    func afterNextCreate(_ body: @escaping @Sendable (String) -> Void) {
        interceptions.withLock { $0.afterCreate = body }
    }

    /// Runs `body` once, at the start of the next write on condition, before it compares; what it throws, the write
    /// throws, having stored nothing (a store that cannot be reached).
    func beforeNextConditionalWrite(_ body: @escaping @Sendable () throws -> Void) {
        interceptions.withLock { $0.beforeConditionalWrite = body }
    }

    /// Runs `body` once, right after the next write on condition that stores, before it returns; with
    /// `losingTheOutcome`, that write then throws ``LostOutcome`` although it stored.
    func afterNextConditionalWrite(losingTheOutcome: Bool = false, _ body: @escaping @Sendable () -> Void = {}) {
        interceptions.withLock { $0.afterConditionalWrite = (body, losingTheOutcome) }
    }

    /// Tells the observers of a store whose feed is ``Feed/announced`` of `change`.
    func announce(_ change: WLStorageStoreChange) {
        interceptions.withLock { $0.announced }?(change)
    }

    // MARK: WLStorageConditionalStore

    func read(key: String) throws -> Data? {
        if let gate = interceptions.withLock({ taking(&$0.holdBeforeReading) }) {
            gate.entered.signal()
            gate.open.wait()
        }
        let data = try base.read(key: key)
        if let hold = interceptions.withLock({ taking(&$0.holdAfterReading) }) {
            hold.reached.signal()
            hold.release.wait()
        }
        return data
    }

    func write(key: String, data: Data) throws {
        try base.write(key: key, data: data)
        interceptions.withLock { taking(&$0.afterWrite) }?()
    }

    func write(_ batch: [WLStorageStoreWrite]) throws {
        try base.write(batch)
        interceptions.withLock { taking(&$0.afterWrite) }?()
    }

    func create(key: String, data: Data) throws -> Bool {
        let created = try base.create(key: key, data: data)
        interceptions.withLock { taking(&$0.afterCreate) }?(key)
        return created
    }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }

    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        try interceptions.withLock { taking(&$0.beforeConditionalWrite) }?()
        let stored = try base.write(key: key, data: data, ifItHolds: expected)
        guard stored, let after = interceptions.withLock({ taking(&$0.afterConditionalWrite) }) else { return stored }
        after.body()
        if after.losingTheOutcome { throw LostOutcome() }
        return stored
    }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        switch feed {
        case .base:
            return base.observeChanges(changed)
        case .announced:
            interceptions.withLock { $0.announced = changed }
            return WLStorageSubscription { [weak self] in self?.interceptions.withLock { $0.announced = nil } }
        }
    }
}

/// The value of `slot`, which is left empty.
private func taking<Value>(_ slot: inout Value?) -> Value? {
    defer { slot = nil }
    return slot
}
