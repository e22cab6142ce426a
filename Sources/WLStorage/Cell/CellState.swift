import Dispatch

/// What a cell knows of the value its backer holds.
@usableFromInline
enum StoredState: UInt8, Sendable {
    /// The backer's value was read, written, or found absent: the cell's value may replace it.
    case known
    /// Nothing is stored, and the default has not been saved yet; any value found stored wins over it.
    case defaultUnsaved
    /// The last read failed: what is stored is unknown, and must not be replaced until read.
    case unknown
}

/// One call of a cell into its backer. A cell runs one at a time (see ``CellState/busyThread``), outside its lock.
enum CellJob<T: Sendable>: Sendable {
    /// Store the local value of this version.
    case write(T, version: UInt64)
    /// Save the default, unless something is stored by now.
    case createDefault(T, version: UInt64)
    /// Read the backer again, because the last read failed. Taken at `version`.
    case reread(version: UInt64)
    /// Read the backer's value if another program changed it. Taken at `version`.
    case check(version: UInt64)
}

/// What a read of the backer found.
enum ReadResult<T: Sendable>: Sendable {
    /// A stored value.
    case value(T)
    /// A stored value in an earlier shape (``ValueDecoding``), written back when `rewrite` is set; `note` says why not.
    case reshaped(T, rewrite: Bool, note: WLStorageError?)
    /// Nothing is stored.
    case absent
    /// What was stored did not decode and was moved aside: nothing is stored now.
    case movedAside(WLStorageError)
    /// JSON another version stored, which this one cannot read: left until a change of this process replaces it.
    case anotherVersion(WLStorageError)
    /// The read failed; what is stored is unknown.
    case failed(WLStorageError)
}

/// What a check for another program's change found.
enum ExternalChange<T: Sendable>: Sendable {
    /// Nothing new: the stored version is one the cell wrote or read.
    case unchanged
    /// Another program stored this value.
    case changed(T)
    /// Another program removed the stored value.
    case removed
    /// Another program stored what this one cannot read at all (another key's secret): unknown until readable.
    case unreadable(WLStorageError)
}

/// How a job ended.
enum JobOutcome<T: Sendable>: Sendable {
    case written
    /// The change was written onto another program's: the key is checked at once, on the same thread.
    case writtenOver
    /// A rewrite on condition found other bytes in place: it is dropped, and the key checked at once.
    case rewriteRefused
    case failed(WLStorageError)
    /// The default was saved.
    case created
    /// A read found this (a reread, or a default create that found something stored).
    case read(ReadResult<T>)
    case checked(ExternalChange<T>)
    /// An error to report that leaves the cell as it was (an outside file that does not decode).
    case reported(WLStorageError)
}

/// What the cell does after a job, outside its lock.
struct JobEffects {
    /// Errors to report, in order.
    var errors: [WLStorageError] = []
    /// The value changed (adopted from the backer): observers are told.
    var valueChanged = false
    /// A tick to schedule.
    var tick: (token: UInt32, delay: UInt64)?
    /// The cell has nothing left to write and was kept alive only for that: the registry lets it go.
    var releaseOrphan = false
    /// A check asked for while the cell was busy, to run in the background now that it is idle.
    var scheduleCheck = false
    /// A check that failed to read, to try again after this many nanoseconds.
    var checkRetry: UInt64?
    /// The backer takes its last read as unseen before the follow-up check (``StoreBacking/forgetLastRead()``).
    var forgetLastRead = false
    /// The cell took the value the check read: its bytes are the base of later changes (``StoreBacking/adoptSeen()``).
    var adoptSeen = false
    /// Flushes waiting for the cell to be idle.
    var waiters: [WaitingFlush] = []
    /// Listeners have notifications to deliver, and no one delivers them yet.
    var drainNotifications = false
    /// Values and errors the state let go of, released after the lock: their deinit may be user code.
    var released: [Any] = []
}

/// A flush waiting for the job in flight to end.
final class WaitingFlush: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func wait() { semaphore.wait() }
    func wake() { semaphore.signal() }
}

/// The memory cell's state. Every transition is a method here that returns what to do; the cell does it after the lock.
@usableFromInline
struct CellState<T: Sendable>: Sendable {
    /// Incremented on every local change; the value is pending while it differs from `writtenVersion`.
    @usableFromInline var version: UInt64 = 0
    var writtenVersion: UInt64 = 0
    @usableFromInline var throttle: WriteThrottle
    @usableFromInline var hasListeners = false
    var stored: StoredState
    /// How many `update`s of the cell are running, on any thread (see ``UpdatesOnThisThread``).
    @usableFromInline var updaters: UInt16 = 0
    /// Incremented on every change, local or adopted: an `update` commits only if it is unchanged since its read.
    @usableFromInline var changeCount: UInt32 = 0
    /// The thread running the cell's job, or 0 when none runs.
    var busyThread: UInt = 0
    /// Listeners, the last error, waiting flushes and rarely set flags: allocated when first needed.
    var extras: CellExtras<T>?
    /// The value, last: the fields before it then have the same offsets whatever the value's type.
    @usableFromInline var value: T

    @inline(__always)  // into the cell's init, which looks up the metadata of this type already
    init(value: T, stored: StoredState, throttle: WriteThrottle) {
        self.value = value
        self.stored = stored
        self.throttle = throttle
    }

    /// Whether a local change has not been written.
    @inline(__always) var isPending: Bool { version != writtenVersion }

    /// Whether the cell has work for its backer: a change to write or a default to save.
    @inline(__always) var hasWork: Bool { isPending || stored == .defaultUnsaved }

    @inline(__always) var isBusy: Bool { busyThread != 0 }

    @inline(__always) var isOrphaned: Bool { extras?.orphaned ?? false }

    mutating func withExtras<R>(_ body: (CellExtras<T>) -> R) -> R {
        if let extras { return body(extras) }
        let made = CellExtras<T>()
        extras = made
        return body(made)
    }

    /// A change made by this process: swaps `value` in (the old one left in `value`, released after the lock). Returns
    /// whether the throttle needs a tick, and whether to drain notifications.
    @inlinable
    mutating func changeLocally(to value: inout T) -> (needsTick: Bool, drain: Bool) {
        swap(&self.value, &value)
        version &+= 1
        changeCount &+= 1
        return (throttle.needsTick, hasListeners && queueNotification())
    }

    /// Queues the value for every listener (or `listener`); returns whether the caller must drain after the lock.
    @usableFromInline
    mutating func queueNotification(for listener: UInt64? = nil) -> Bool {
        let value = self.value
        return withExtras { extras in
            if listener == nil && extras.pendingNotifications.count >= Self.notificationBacklog {
                // Changes outpace listeners: older ones are dropped, the latest kept, in order.
                extras.pendingNotifications.removeAll { $0.listener == nil }
            }
            extras.pendingNotifications.append((value, listener))
            guard !extras.draining else { return false }
            extras.draining = true
            return true
        }
    }

    /// The most notifications queued before older changes are dropped.
    static var notificationBacklog: Int { 256 }

    /// The next notifications to deliver, with their listeners; `nil` (and draining over) when none is left.
    mutating func takeNotifications() -> (
        values: [(value: T, listener: UInt64?)], listeners: [UInt64: @Sendable (T) -> Void]
    )? {
        guard let extras, !extras.pendingNotifications.isEmpty else {
            extras?.draining = false
            return nil
        }
        defer { extras.pendingNotifications = [] }
        return (extras.pendingNotifications, extras.listeners)
    }

    /// Whether notifications were queued since the last batch was taken; when none were, draining is over.
    mutating func hasNotificationsLeft() -> Bool {
        guard let extras, !extras.pendingNotifications.isEmpty else {
            extras?.draining = false
            return false
        }
        return true
    }

    // MARK: Starting jobs

    /// The job for the cell's pending work, or `nil`; marks the cell busy on `thread`. An unknown stored value is read
    /// first. With `upTo`, only changes up to that version count.
    mutating func startWork(on thread: UInt, now: UInt64, upTo target: UInt64? = nil) -> CellJob<T>? {
        let job: CellJob<T>
        if isPending && target.map({ writtenVersion < $0 }) ?? true {
            if stored == .unknown {
                job = .reread(version: version)
            } else {
                throttle.writeStarts(now: now)
                job = .write(value, version: version)
            }
        } else if stored == .defaultUnsaved && !isPending {
            throttle.writeStarts(now: now)
            job = .createDefault(value, version: version)
        } else {
            return nil
        }
        busyThread = thread
        return job
    }

    /// The job a check for an outside change starts, marking the cell busy; `nil` when busy (it runs after the job).
    mutating func startCheck(on thread: UInt) -> CellJob<T>? {
        guard !isBusy else {
            withExtras { $0.checkRequested = true }
            return nil
        }
        extras?.checkRequested = false
        busyThread = thread
        return stored == .unknown ? .reread(version: version) : .check(version: version)
    }

    /// What a tick with `token` does: the pending work, or nothing when stale or busy (the job re-arms when it ends).
    mutating func startTick(_ token: UInt32, on thread: UInt, now: UInt64, defaultValue: T?) -> CellJob<T>? {
        guard throttle.isCurrent(token) else { return nil }
        guard !isBusy else {
            throttle.disarm()
            return nil
        }
        if isPending && !throttle.writesOnTicks {
            // Without a flush interval changes are written at a flush only: this tick saves the default alone.
            guard stored == .defaultUnsaved, let defaultValue else {
                throttle.disarm()
                return nil
            }
            throttle.writeStarts(now: now)
            busyThread = thread
            return .createDefault(defaultValue, version: writtenVersion)
        }
        guard let job = startWork(on: thread, now: now) else {
            // A tick armed with nothing pending is disarmed, or it would keep later changes from arming one.
            throttle.disarm()
            return nil
        }
        return job
    }

    /// Whether a failed read may succeed when retried unchanged: a system failure, not a file too large, irregular or
    /// undecodable (whose change brings an event).
    static func isTransient(_ error: WLStorageError) -> Bool {
        switch error.code {
        case .decodingFailed, .valueTooLarge, .notARegularFile: false
        default: true
        }
    }

    /// Has a check tried again after the backoff, unless one is waiting already.
    mutating func armCheckRetry(_ effects: inout JobEffects) {
        // The backoff counts retries, not events.
        let failures = withExtras { extras -> UInt32? in
            guard !extras.checkRetryArmed else { return nil }
            extras.checkRetryArmed = true
            extras.failedChecks &+= 1
            return extras.failedChecks
        }
        if let failures { effects.checkRetry = WriteThrottle.retryDelay(afterFailures: failures, interval: 0) }
    }

    /// The check retry armed by ``armCheckRetry(_:)`` is due: it runs now.
    mutating func checkRetryDue() {
        extras?.checkRetryArmed = false
    }

    /// Replaces the last error (old one released after the lock), keeping ``CellExtras/storedByAnotherVersion`` in
    /// step.
    @inline(__always)  // the common case, nothing to clear, without a call that would look up this type
    mutating func setLastError(_ error: WLStorageError?, _ effects: inout JobEffects) {
        // A misuse stays until a later change is written (see ``recordMisuse(_:_:)``).
        if error == nil && (extras?.lastError == nil || extras?.misuseVersion != nil) { return }
        replaceLastError(error, &effects)
    }

    private mutating func replaceLastError(_ error: WLStorageError?, _ effects: inout JobEffects) {
        withExtras { extras in
            if let old = extras.lastError { effects.released.append(old) }
            extras.lastError = error
            extras.misuseVersion = nil
            if error == nil {
                extras.storedByAnotherVersion = false
            } else if error?.code == .storedByAnotherVersion {
                extras.storedByAnotherVersion = true
            }
        }
    }

    /// Records a misuse as the last error until a later change is written or another error replaces it.
    mutating func recordMisuse(_ error: WLStorageError, _ effects: inout JobEffects) {
        setLastError(error, &effects)
        extras?.misuseVersion = version
    }

    /// Whether ``StorageCell/removeUnknownFields()`` has work: not over another version's value with nothing pending.
    var removesUnknownFields: Bool {
        isPending || extras?.storedByAnotherVersion != true
    }
}

/// The parts of a cell's state that most cells never use.
final class CellExtras<T: Sendable>: @unchecked Sendable {  // read and written only under the cell's state lock
    var listeners: [UInt64: @Sendable (T) -> Void] = [:]
    var nextListenerID: UInt64 = 0
    /// Values waiting to be delivered to the listeners (all of them, or one), in the order of the changes.
    var pendingNotifications: [(value: T, listener: UInt64?)] = []
    /// A thread is delivering the pending notifications.
    var draining = false
    var lastError: WLStorageError?
    /// When ``lastError`` is a misuse, the version then: a write of a later version clears it.
    var misuseVersion: UInt64?
    /// Flushes waiting for the job in flight.
    var waiters: [WaitingFlush] = []
    /// A check for another program's change came while the cell was busy.
    var checkRequested = false
    /// Every storage of the cell was released with work left: the registry keeps the cell until it is done.
    var orphaned = false
    /// How many times the file was checked for another program's change (for tests).
    var externalChecks = 0
    /// The version that only rewrites the value read in an earlier type's shape (see ``CellState/markRewrite()``).
    var rewriteVersion: UInt64?
    /// Unreadable bytes replaced a read value: the next read that finds nothing is a removal.
    var unreadableSinceKnown = false
    /// What is stored is JSON that another version stored and this one cannot read: left as it is until a set.
    var storedByAnotherVersion = false
    /// Checks in a row that could not read the file.
    var failedChecks: UInt32 = 0
    /// A check is to be tried again after a failed one: no other retry is armed meanwhile.
    var checkRetryArmed = false
}
