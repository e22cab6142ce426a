import Observation
import Synchronization

/// What the memory cell guards: the value, its version and the throttle, with the rarely used parts boxed.
@usableFromInline
struct CellState<T: Sendable>: Sendable {
    @usableFromInline var value: T
    /// Incremented on every change; the value is pending while it differs from `writtenVersion`.
    @usableFromInline var version: UInt64 = 0
    var writtenVersion: UInt64 = 0
    @usableFromInline var throttle: WriteThrottle
    @usableFromInline var hasListeners = false
    /// Listeners, the last error and counters: allocated when first needed, so an idle cell stays small.
    var extras: CellExtras<T>?

    init(value: T, throttle: WriteThrottle) {
        self.value = value
        self.throttle = throttle
    }

    var isPending: Bool { version != writtenVersion }

    mutating func withExtras<R>(_ body: (CellExtras<T>) -> R) -> R {
        if let extras { return body(extras) }
        let made = CellExtras<T>()
        extras = made
        return body(made)
    }

    /// Hands the current value to every listener. Listeners only enqueue (a continuation's `yield`, a queue's
    /// `async`), so calling them under the lock is safe and keeps their deliveries in the order of the changes.
    @usableFromInline
    func notifyListeners() {
        guard let listeners = extras?.listeners else { return }
        for listener in listeners.values { listener(value) }
    }

    /// Starts a write of the pending value, if any: disarms the throttle and returns the value and its version.
    mutating func beginWrite(now: UInt64) -> (value: T, version: UInt64)? {
        guard isPending else {
            // A tick can be armed with nothing pending (a set's tick armed just after a flush wrote its value);
            // leaving it armed would keep every later change from arming one.
            throttle.disarm()
            return nil
        }
        throttle.writeStarts(now: now)
        return (value, version)
    }
}

/// The parts of a cell's state that most cells never use.
final class CellExtras<T: Sendable>: @unchecked Sendable {  // read and written only under the cell's state lock
    var listeners: [UInt64: @Sendable (T) -> Void] = [:]
    var nextListenerID: UInt64 = 0
    var lastError: WLStorageError?
    /// How many times the file was checked for another program's change (for tests).
    var externalChecks = 0
}

/// What every cell is observed through, whatever its value type: one registrar each, and one key path for all.
///
/// The key path names a property of this non-generic class, so it is formed once per process; a key path into the
/// generic ``StorageCell`` would be formed again, at a cost of microseconds and a hundred bytes, for every cell.
@usableFromInline
class ObservedCell: Observable, @unchecked Sendable {  // no mutable state: the registrar does its own locking
    @usableFromInline let registrar = ObservationRegistrar()
    @usableFromInline nonisolated(unsafe) let valueKeyPath: KeyPath<ObservedCell, Int> = ObservedCell.keyPath
    private nonisolated(unsafe) static let keyPath: KeyPath<ObservedCell, Int> = \ObservedCell.observedValue

    /// The observed property: only its key path matters.
    var observedValue: Int { 0 }
}

/// One value in memory, shared by every ``WLStorage`` of the same file in this process.
///
/// Gets and sets take `state`, a ``Lock``, for a few nanoseconds. Disk work runs off the caller's thread, one write
/// at a time per cell under `diskLock`, which only ``flush()`` waits for. No lock is held while user code runs:
/// observers are notified by the registrar outside `state`, and errors are reported outside `diskLock`.
@usableFromInline
final class StorageCell<T: Codable & Sendable>: ObservedCell, @unchecked Sendable {  // state: `state`, disk: `diskLock`
    @usableFromInline let state: Lock<CellState<T>>
    private let diskLock = Lock<Void>(())
    let backer: any WLStorageBacker<T>
    let scheduler: any WriteScheduler

    init(value: T, backer: any WLStorageBacker<T>, interval: UInt64?, scheduler: any WriteScheduler) {
        self.state = Lock(CellState(value: value, throttle: WriteThrottle(interval: interval)))
        self.backer = backer
        self.scheduler = scheduler
    }

    /// The file this cell stands for, when its backer is a file: its key in the process-wide registry.
    var fileKey: FileKey? {
        (backer as? any FileBacker)?.fileKey
    }

    deinit {
        StorageRegistry.shared.unregister(ObjectIdentifier(self), fileKey: fileKey)
    }

    // MARK: Memory

    @inlinable
    func get() -> T {
        registrar.access(self, keyPath: valueKeyPath)
        return state.withLock { $0.value }
    }

    @inlinable
    func set(_ newValue: T) {
        registrar.withMutation(of: self, keyPath: valueKeyPath) {
            let needsTick = state.withLock { state in
                state.value = newValue
                state.version &+= 1
                if state.hasListeners { state.notifyListeners() }
                return state.throttle.needsTick
            }
            if needsTick { armTick() }
        }
    }

    /// Marks the current value as pending, so that it is written like a change.
    func markPending() {
        let needsTick = state.withLock { state in
            state.version &+= 1
            return state.throttle.needsTick
        }
        if needsTick { armTick() }
    }

    var lastError: WLStorageError? {
        state.withLock { $0.extras?.lastError }
    }

    var hasPendingChanges: Bool {
        state.withLock { $0.isPending }
    }

    func record(_ error: WLStorageError) {
        state.withLock { $0.withExtras { $0.lastError = error } }
        WLStorageError.report(error)
    }

    // MARK: Listeners

    /// Adds a listener, which is called with every change, and with the current value at once when
    /// `sendingCurrent` is set. Listeners run under the state lock, so they may only enqueue.
    func addListener(sendingCurrent: Bool, _ listener: @escaping @Sendable (T) -> Void) -> UInt64 {
        state.withLock { state in
            let value = state.value
            state.hasListeners = true
            return state.withExtras { extras in
                let id = extras.nextListenerID
                extras.nextListenerID &+= 1
                extras.listeners[id] = listener
                if sendingCurrent { listener(value) }
                return id
            }
        }
    }

    func removeListener(_ id: UInt64) {
        state.withLock { state in
            guard let extras = state.extras else { return }
            extras.listeners[id] = nil
            state.hasListeners = !extras.listeners.isEmpty
        }
    }

    var listenerCount: Int {
        state.withLock { $0.extras?.listeners.count ?? 0 }
    }

    // MARK: Disk

    @usableFromInline
    func armTick() {
        let now = scheduler.now
        guard let tick = state.withLock({ $0.throttle.arm(now: now) }) else { return }
        schedule(tick)
    }

    private func schedule(_ tick: (token: UInt32, delay: UInt64)) {
        scheduler.schedule(after: tick.delay) { [weak self] in
            self?.runTick(tick.token)
        }
    }

    private func runTick(_ token: UInt32) {
        // A stale tick leaves at once rather than wait for the disk lock behind a slow write.
        guard state.withLock({ $0.throttle.isCurrent(token) }) else { return }
        let failure = diskLock.withLock { _ -> WLStorageError? in
            let now = scheduler.now
            let job = state.withLock { state -> (value: T, version: UInt64)? in
                guard state.throttle.isCurrent(token) else { return nil }
                return state.beginWrite(now: now)
            }
            return job.flatMap(write)
        }
        if let failure { handle(failure) }
    }

    /// Writes the pending value, if any, and returns when it is written or has failed. Waits for a write in
    /// flight first. Concurrent flushes take turns.
    func flush() {
        let failure = diskLock.withLock { _ -> WLStorageError? in
            let now = scheduler.now
            return state.withLock { $0.beginWrite(now: now) }.flatMap(write)
        }
        if let failure { handle(failure) }
    }

    /// Calls the backer. Runs under `diskLock`, never under `state`.
    private func write(_ job: (value: T, version: UInt64)) -> WLStorageError? {
        do {
            try backer.write(value: job.value)
        } catch {
            return WLStorageError(wrapping: error, key: backer.key)
        }
        state.withLock { state in
            state.writtenVersion = max(state.writtenVersion, job.version)
            state.throttle.writeEnded(succeeded: true)
            state.extras?.lastError = nil
        }
        return nil
    }

    /// Keeps the value pending, reports the error, and arms a retry when automatic writes are on.
    private func handle(_ failure: WLStorageError) {
        let now = scheduler.now
        let retry = state.withLock { state in
            state.withExtras { $0.lastError = failure }
            state.throttle.writeEnded(succeeded: false)
            return state.isPending ? state.throttle.arm(now: now) : nil
        }
        WLStorageError.report(failure)
        if let retry { schedule(retry) }
    }
}

extension StorageCell: RegisteredCell {
    /// Reads the file if another program replaced it, and adopts the value unless a local change is pending.
    ///
    /// Runs under `diskLock`, so a write of this cell in flight has finished and recorded its file version first:
    /// the cell's own writes are recognised and never come back as changes.
    func checkForExternalChange() {
        guard let fileBacker = backer as? WLStorageDefaultBacker<T> else { return }
        let change = diskLock.withLock { _ in
            // The version is taken with the value, under the disk lock: a local change made after this point,
            // even one already written by the time the value is adopted, is newer and wins.
            let version = state.withLock { $0.version }
            return Result { () throws(WLStorageError) in try fileBacker.readExternalChange() }.map { ($0, version) }
        }
        switch change {
        case .failure(let error):
            record(error)
        case .success((let value?, let version)):
            adoptExternal(value, ifStillAt: version)
        case .success((nil, _)):
            break
        }
        state.withLock { $0.withExtras { $0.externalChecks += 1 } }
    }

    /// Takes another program's value. Last writer wins, by the time of the write: a local change still pending, or
    /// made since the outside value was read, is written after it, so the local value is kept.
    private func adoptExternal(_ value: T, ifStillAt version: UInt64) {
        func isCurrent(_ state: CellState<T>) -> Bool { !state.isPending && state.version == version }
        guard state.withLock({ isCurrent($0) }) else { return }
        registrar.withMutation(of: self, keyPath: valueKeyPath) {
            state.withLock { state in
                guard isCurrent(state) else { return }
                state.value = value
                if state.hasListeners { state.notifyListeners() }
            }
        }
    }

    var externalChecks: Int {
        state.withLock { $0.extras?.externalChecks ?? 0 }
    }
}

extension WLStorageError {
    /// `error` itself when it is a ``WLStorageError`` (with `key` filled in), else a
    /// ``WLStorageError/Code/backerFailed`` error wrapping it.
    init(wrapping error: any Error, key: String) {
        if var error = error as? WLStorageError {
            if error.key == nil { error.key = key }
            self = error
        } else {
            self.init(code: .backerFailed, message: "the backer failed: \(error)", key: key, underlying: error)
        }
    }
}
