import Observation
import Synchronization

/// What the memory cell guards: the value, its version, the throttle, and the listeners.
@usableFromInline
struct CellState<T: Sendable>: Sendable {
    @usableFromInline var value: T
    /// Incremented on every change; the value is pending while it differs from `writtenVersion`.
    @usableFromInline var version: UInt64 = 0
    var writtenVersion: UInt64 = 0
    @usableFromInline var throttle: WriteThrottle
    @usableFromInline var hasListeners = false
    var listeners: [UInt64: @Sendable (T) -> Void] = [:]
    var nextListenerID: UInt64 = 0
    var lastError: WLStorageError?
    /// How many times the file was checked for another program's change (for tests).
    var externalChecks = 0

    init(value: T, throttle: WriteThrottle) {
        self.value = value
        self.throttle = throttle
    }

    var isPending: Bool { version != writtenVersion }

    /// Hands the current value to every listener. Listeners only enqueue (a continuation's `yield`, a queue's
    /// `async`), so calling them under the lock is safe and keeps their deliveries in the order of the changes.
    @usableFromInline
    func notifyListeners() {
        for listener in listeners.values { listener(value) }
    }

    /// Starts a write of the pending value, if any: disarms the throttle and returns the value and its version.
    mutating func beginWrite(now: UInt64) -> (value: T, version: UInt64)? {
        guard isPending else { return nil }
        throttle.writeStarts(now: now)
        return (value, version)
    }
}

/// One value in memory, shared by every ``WLStorage`` of the same file in this process.
///
/// Gets and sets take `state`, a `Mutex`, for a few nanoseconds. Disk work runs off the caller's thread, one write
/// at a time per cell under `diskLock`, which only ``flush()`` waits for. No lock is held while user code runs:
/// observers are notified by the registrar outside `state`, and errors are reported outside `diskLock`.
@usableFromInline
final class StorageCell<T: Codable & Sendable>: Observable, Sendable {
    @usableFromInline let state: Lock<CellState<T>>
    @usableFromInline let registrar = ObservationRegistrar()
    /// Built once: a key path literal into a generic class costs microseconds to form.
    @usableFromInline nonisolated(unsafe) let valueKeyPath: KeyPath<StorageCell<T>, T>
    private let diskLock = Lock<Void>(())
    let backer: any WLStorageBacker<T>
    let scheduler: any WriteScheduler
    /// The file this cell stands for, when its backer is a file: the key of the process-wide registry.
    let fileKey: String?

    init(value: T, backer: any WLStorageBacker<T>, interval: UInt64?, scheduler: any WriteScheduler, fileKey: String?) {
        self.state = Lock(CellState(value: value, throttle: WriteThrottle(interval: interval)))
        self.valueKeyPath = \StorageCell<T>.observedValue
        self.backer = backer
        self.scheduler = scheduler
        self.fileKey = fileKey
    }

    deinit {
        StorageRegistry.shared.unregister(ObjectIdentifier(self), fileKey: fileKey)
    }

    /// The value, as observers see it.
    var observedValue: T { self.get() }

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
        state.withLock { $0.lastError }
    }

    var hasPendingChanges: Bool {
        state.withLock { $0.isPending }
    }

    func record(_ error: WLStorageError) {
        state.withLock { $0.lastError = error }
        WLStorageError.report(error)
    }

    // MARK: Listeners

    /// Adds a listener, which is called with every change, and with the current value at once when
    /// `sendingCurrent` is set. Listeners run under the state lock, so they may only enqueue.
    func addListener(sendingCurrent: Bool, _ listener: @escaping @Sendable (T) -> Void) -> UInt64 {
        state.withLock { state in
            let id = state.nextListenerID
            state.nextListenerID &+= 1
            state.listeners[id] = listener
            state.hasListeners = true
            if sendingCurrent { listener(state.value) }
            return id
        }
    }

    var listenerCount: Int {
        state.withLock { $0.listeners.count }
    }

    func removeListener(_ id: UInt64) {
        state.withLock { state in
            state.listeners[id] = nil
            state.hasListeners = !state.listeners.isEmpty
        }
    }

    // MARK: Disk

    @usableFromInline
    func armTick() {
        let now = scheduler.now
        guard let tick = state.withLock({ $0.throttle.arm(now: now) }) else { return }
        schedule(tick)
    }

    private func schedule(_ tick: (token: UInt64, delay: UInt64)) {
        scheduler.schedule(after: tick.delay) { [weak self] in
            self?.runTick(tick.token)
        }
    }

    private func runTick(_ token: UInt64) {
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
            state.lastError = nil
        }
        return nil
    }

    /// Keeps the value pending, reports the error, and arms a retry when automatic writes are on.
    private func handle(_ failure: WLStorageError) {
        let now = scheduler.now
        let retry = state.withLock { state in
            state.lastError = failure
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
            Result { () throws(WLStorageError) in try fileBacker.readExternalChange() }
        }
        switch change {
        case .failure(let error):
            record(error)
        case .success(let value?):
            adoptExternal(value)
        case .success(nil):
            break
        }
        state.withLock { $0.externalChecks += 1 }
    }

    /// Takes another program's value. Last writer wins, by the time of the write: a local change still pending is
    /// written after this one, so it is kept in memory and replaces the outside value on disk.
    private func adoptExternal(_ value: T) {
        guard !hasPendingChanges else { return }
        registrar.withMutation(of: self, keyPath: valueKeyPath) {
            state.withLock { state in
                guard !state.isPending else { return }
                state.value = value
                if state.hasListeners { state.notifyListeners() }
            }
        }
    }

    var externalChecks: Int {
        state.withLock { $0.externalChecks }
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
