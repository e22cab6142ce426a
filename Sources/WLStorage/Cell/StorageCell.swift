import Dispatch
import Foundation
import Observation
import Synchronization
import WLStorageFiles

// Locks: `StorageCell.state` guards a cell's ``CellState``; the registry, the router, the file monitor, the store
// feeds, a backer's known version and the directory table each guard their own table. Every lock is a leaf: none is
// held while another is taken, while a backer, an observer or a listener runs, or while a user object (closure,
// continuation, backer, storage) is released: such objects are moved out and released after the lock.
//
// Outside changes (inotify, store and custom feeds) reach the ``ChangeRouter``, which has the cells concerned check
// their keys; ``CellState`` adopts by the last-writer rule. A cell runs one job at a time, on its `busyThread`.

/// What every cell is observed through: a registrar each, and one key path for all, formed once per process.
@usableFromInline
class ObservedCell: Observable, @unchecked Sendable {  // no mutable state: the registrar does its own locking
    @usableFromInline let registrar = ObservationRegistrar()
    @usableFromInline nonisolated(unsafe) let valueKeyPath: KeyPath<ObservedCell, Int> = ObservedCell.keyPath
    /// ThreadSanitizer's hooks, for the locks of gets and sets: kept here, they cost a load rather than a call.
    @usableFromInline let sanitizerHooks = SanitizerHooks.active
    private nonisolated(unsafe) static let keyPath: KeyPath<ObservedCell, Int> = \ObservedCell.observedValue

    /// Only its key path matters.
    var observedValue: Int { 0 }
}

/// One value in memory, shared by every ``WLStorage`` of the same file in this process. Gets and sets take the `state`
/// lock briefly; backer calls run off the caller's thread, one at a time, and only ``flush()`` waits for them.
@usableFromInline
final class StorageCell<T: Codable & Sendable>: ObservedCell, @unchecked Sendable {  // state: `state`
    @usableFromInline let state: Lock<CellState<T>>
    /// The backer, and its kind when the package made it, told by the binding: spares a cast on every flush.
    private let ownBacker: OwnBacker<T>
    @usableFromInline var updatesInStore: Bool { storeMedium?.writesOnCondition == true }
    /// The same backer when it is a key's in a store, and its medium when that store is not a directory.
    var keyBacker: WLStorageDefaultBacker<T>? { if case .key(let keyBacker) = ownBacker { keyBacker } else { nil } }
    /// Whether the key was open with another value type when the cell was made: memory only, writes nothing.
    var refusesEveryWrite: Bool { if case .refusing = ownBacker { true } else { false } }
    var storeMedium: StoreMedium? { keyBacker?.storeMedium }
    let scheduler: any WriteScheduler
    /// The migrations of the cell's storages, in the order they came (see ``add(_:)``); guarded by `state`: a lock of
    /// their own, of a type generic in `T`, cost the making of every cell metadata look-ups.
    private nonisolated(unsafe) var migrations: [WLStorageMigration<T>]
    /// The value a removal returns to, made now if it has not been: never read it under a lock of the package.
    var defaultValue: T { defaults.value }

    @inline(__always)
    init(
        value: T, stored: StoredState, defaults: CellDefault<T>, migrations: [WLStorageMigration<T>] = [],
        own: OwnBacker<T>, interval: UInt64?, scheduler: any WriteScheduler
    ) {
        self.state = Lock(CellState(value: value, stored: stored, throttle: WriteThrottle(interval: interval)))
        self.ownBacker = own
        self.scheduler = scheduler
        self.defaults = defaults
        // Their renames are the backer's already: a key's binding gave them before it read.
        self.migrations = migrations
        super.init()
    }

    /// Adds the migrations of a storage joining the cell; renames go to a key's backer, which writes both names. A rename
    /// new to the backer has the key read again, or a write would put under the old name a value not read from it.
    func add(_ migrations: [WLStorageMigration<T>]) {
        guard !migrations.isEmpty else { return }
        // The old array's elements are copied, not released: no user object goes under the lock.
        state.withLock { _ in self.migrations += migrations }
        let renames = migrations.compactMap(\.rename)
        guard !renames.isEmpty, case .key(let backer) = ownBacker, backer.addRenames(renames) else { return }
        backer.forgetLastRead()
        checkForExternalChange()
    }

    /// How the backer's bytes become the value: fields they lack come from the default, then the migrations.
    var decoding: ValueDecoding<T> {
        ValueDecoding(
            defaultValue: { [defaults] in defaults.value },
            migrations: state.withLock { _ in migrations })
    }

    /// The backer when it offers more than ``WLStorageBacker`` (``StoreBacking``).
    var access: (any StoreBacking<T>)? {
        switch ownBacker {
        case .key(let keyBacker): keyBacker
        case .observed(let observed): observed
        case .other, .refusing: nil
        }
    }

    var backer: any WLStorageBacker<T> {
        switch ownBacker {
        case .key(let keyBacker): keyBacker
        case .observed(let observed): observed
        case .other(let backer), .refusing(let backer): backer
        }
    }

    /// The store and key, when the backer is a store's; the cell holds one use of the store's feed.
    var storeKey: CellKey? { storeMedium.map { .store($0.identity, key: $0.storedKey) } }

    var directory: StorageDirectory? { keyBacker?.directory }
    var fileName: String? { keyBacker?.fileName }

    var registeredKey: CellKey?  // guarded by the registry's lock (see ``RegisteredCell``)
    /// Twice the number of live storages, plus one while the cell holds a use of its watch or feed.
    private let storagesAndWatch = Atomic<Int32>(0)  // four bytes, in the padding after the key
    let defaults: CellDefault<T>  // last, as its size varies with the value's type

    /// Takes over the use of the watch or feed made for this cell; it ends with the cell.
    func adoptWatch() { storagesAndWatch.bitwiseOr(1, ordering: .relaxed) }

    deinit {
        Runtime.shared.registry.unregister(self)
        if storagesAndWatch.load(ordering: .relaxed) & 1 != 0 {
            if let directory { Runtime.shared.router.unfollow(.directory(directory)) }
            if let storeMedium { Runtime.shared.router.unfollow(.store(storeMedium.identity)) }
        }
    }

    // MARK: Memory

    @inlinable
    func get() -> T {
        registrar.access(self, keyPath: valueKeyPath)
        return state.withLock(hooks: sanitizerHooks) { $0.value }
    }

    @inlinable
    func set(_ newValue: T) {
        registrar.withMutation(of: self, keyPath: valueKeyPath) {
            // Released after the lock: its deinit is user code.
            var value = newValue
            switch state.withLock(hooks: sanitizerHooks, { $0.set(&value) }) {
            case .updating:
                setWhileUpdating(&value)
            case .changed(let needsTick, let drain):
                if needsTick { armTick() }
                if drain { drainNotifications() }
            }
        }
    }

    /// A set during an update of the cell: made unless it comes from that update's closure on this thread (refused).
    @usableFromInline
    func setWhileUpdating(_ value: inout T) {
        if UpdatesOnThisThread.contains(ObjectIdentifier(self)) { return refuseChangeInsideUpdate(what: "set") }
        let (needsTick, drain) = state.withLock { $0.changeLocally(to: &value) }
        if needsTick { armTick() }
        if drain { drainNotifications() }
    }

    /// Marks the value read in an earlier shape as a change, written back by the usual path.
    func rewriteStoredValue() {
        if state.withLock({ $0.rewriteRead() }) { armTick() }
    }

    var lastError: WLStorageError? { state.withLock { $0.extras?.lastError } }

    var hasPendingChanges: Bool { state.withLock { $0.isPending } }

    /// Writes the value without unknown stored members; returns when written (``WLStorage/removeUnknownFields()``).
    func removeUnknownFields() {
        // A value this version cannot read has nothing to remove, nor one that is no object; writing the value in memory
        // would destroy a newer one. The writes that drop the fields are those the state starts while the removal waits.
        let keepsFields = access?.keepsFields ?? true
        let flushes = state.withLock { state in
            guard state.removesUnknownFields else { return false }
            if keepsFields { state.dropUnknownFields() }
            return state.isPending
        }
        guard flushes else { return }
        flushReportingMisuse()
    }

    /// Records and reports `error`; with `asMisuse`, a misuse of the storage (see ``CellState/recordMisuse(_:_:)``).
    func record(_ error: WLStorageError, asMisuse: Bool = false) {
        // Released after the lock: its underlying error may be the user's.
        var effects = JobEffects()
        state.withLock { asMisuse ? $0.recordMisuse(error, &effects) : $0.setLastError(error, &effects) }
        _ = effects
        WLStorageSystem.report(error)
    }

    // MARK: Listeners

    /// Adds a listener, called outside the lock with every change (and first the current value with `sendingCurrent`).
    func addListener(sendingCurrent: Bool, _ listener: @escaping @Sendable (T) -> Void) -> UInt64 {
        let (id, drain) = state.withLock { $0.addListener(listener, sendingCurrent: sendingCurrent) }
        if drain { drainNotifications() }
        return id
    }

    /// Delivers queued notifications in order, outside the lock, one draining thread at a time: the caller one batch,
    /// a package thread the rest. A listener removed meanwhile is not called (looked up before each call).
    @usableFromInline
    func drainNotifications() {
        guard let batch = state.withLock({ $0.takeNotifications() }) else { return }
        for (value, target) in batch.values {
            if let target {
                if let listener = batch.listeners[target], isListening(target) { listener(value) }
            } else {
                for (id, listener) in batch.listeners where isListening(id) { listener(value) }
            }
        }
        guard state.withLock({ $0.hasNotificationsLeft() }) else { return }
        // A queue of its own: the shared pool may wait on blocked workers, and a slow handler holds up no other cell.
        DispatchQueue(label: "WLStorage.notifications").async { [self] in drainNotifications() }
    }

    /// Removes a listener, released after the lock: it may hold the last reference to a storage of this cell.
    func removeListener(_ id: UInt64) { _ = state.withLock { $0.removeListener(id) } }

    private func isListening(_ id: UInt64) -> Bool { state.withLock { $0.extras?.listeners[id] != nil } }

    var listenerCount: Int { state.withLock { $0.extras?.listeners.count ?? 0 } }

    // MARK: Ticks

    @usableFromInline
    func armTick(force: Bool = false) {
        let now = scheduler.now
        guard let tick = state.withLock({ $0.throttle.arm(now: now, force: force) }) else { return }
        schedule(tick)
    }

    func schedule(_ tick: (token: UInt32, delay: UInt64)) {
        scheduler.schedule(after: tick.delay) { [weak self] in
            self?.runTick(tick.token)
        }
    }

    private func runTick(_ token: UInt32) {
        let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
        let now = scheduler.now
        let defaultValue = defaults.ifMade
        guard let job = state.withLock({ $0.startTick(token, on: thread, now: now, defaultValue: defaultValue) })
        else { return }
        run(job, chaining: true)
    }

    /// Counts a storage, balanced by ``storageReleased()``.
    func storageAttached() { storagesAndWatch.add(2, ordering: .acquiringAndReleasing) }

    /// Another storage joins: the shortest interval holds, and a change waiting for a longer one is written sooner.
    func join(interval: UInt64?) {
        let now = scheduler.now
        if let tick = state.withLock({ $0.join(interval: interval, now: now) }) { schedule(tick) }
    }

    // MARK: Flush

    /// Writes what was set before the call, an unsaved default or a rewrite, after a job in flight; stops at the first
    /// failure. With `waitingForJobs` off (a flush from a backer), a job elsewhere is left to finish the work.
    @discardableResult
    func flush(waitingForJobs: Bool = true) -> FlushResult {
        let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
        var target: UInt64?
        while true {
            let now = scheduler.now
            let step = state.withLock { state in
                state.flushStep(on: thread, now: now, upTo: &target, waitingForJobs: waitingForJobs)
            }
            switch step {
            case .done:
                return .done
            case .reentrant:
                return .reentrant
            case .wait(let waiter):
                waiter.wait()
            case .run(let job):
                if !run(job, chaining: false) { return .failed }
            }
        }
    }

    /// The flush of `WLStorage.flush()`: a reentrant call is reported rather than left to hang.
    func flushReportingMisuse() {
        if flush() == .reentrant {
            record(
                WLStorageError(
                    code: .reentrantCall,
                    message: "flush() was called from inside this storage's own backer, whose write it would wait for;"
                        + " it returned without writing",
                    key: backer.key),
                asMisuse: true)
        }
    }

    // MARK: Storages released

    /// A storage of this cell is released: flushes; with work left, the registry keeps the cell until it is done.
    func storageReleased() {
        let remaining = storagesAndWatch.subtract(2, ordering: .acquiringAndReleasing).newValue >> 1
        if case .refusing = ownBacker { return }
        flush()
        guard remaining <= 0, state.withLock({ $0.hasWork }) else { return }
        Runtime.shared.registry.keep(self)
        let now = scheduler.now
        let (orphaned, tick) = state.withLock { $0.orphan(now: now) }
        if !orphaned { Runtime.shared.registry.letGo(self) }
        if let tick { schedule(tick) }
    }
}

extension JobOutcome {
    /// Whether finishing the job can change the cell's value (and observers must be told around it).
    var mayChangeValue: Bool {
        switch self {
        // Finding nothing may be a removal (after unreadable bytes).
        case .read(.value), .read(.reshaped), .read(.absent), .read(.movedAside), .checked(.changed),
            .checked(.removed):
            true
        default: false
        }
    }
}

/// How a flush of a cell ended: all set before it written, a write failed (reported, still pending), or reentrant.
enum FlushResult {
    case done
    case failed
    case reentrant
}

/// The backer of a cell: a key's, a custom one with a feed, another, or one refusing writes; one word in the cell.
enum OwnBacker<T: Codable & Sendable> {
    case key(WLStorageDefaultBacker<T>)
    case observed(ObservedBacker<T>)
    indirect case other(any WLStorageBacker<T>)  // boxed, as is the next
    indirect case refusing(any WLStorageBacker<T>)
}

/// One cell's change in a store batch, with its version (for ``StorageCell/finishBatchWrite(_:data:failure:)``).
struct BatchWrite: Sendable {
    let write: WLStorageStoreWrite
    let version: UInt64
    let condition: BatchCondition
}

extension StorageCell: RegisteredCell {
    var valueTypeName: String { TypeName.of(T.self) }

    func offer(_ changes: [WLStorageCarriedChange], mustRead: Bool) { storeMedium?.offer(changes, mustRead: mustRead) }

    func flushState(from thread: UInt) -> CellFlushState {
        state.withLock { state in
            if state.busyThread == thread { return .busyHere }
            return state.hasWork || state.isBusy ? .work : .idle
        }
    }
}

extension WLStorageError {
    /// `error` if a ``WLStorageError`` (its `key` set), else a ``WLStorageError/Code/backerFailed`` wrapping it.
    init(wrapping error: any Error, key: String) {
        if var error = error as? WLStorageError {
            if error.key == nil { error.key = key }
            self = error
        } else {
            self.init(code: .backerFailed, message: "the backer failed: \(error)", key: key, underlying: error)
        }
    }
}
