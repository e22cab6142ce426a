/// The memory cell's state. Every transition is a method here that returns what to do; the cell does it after the lock.
@usableFromInline
package struct CellState<T: Sendable>: Sendable {
    /// Incremented on every local change; the value is pending while it differs from `writtenVersion`.
    @usableFromInline package var version: UInt64 = 0
    @usableFromInline package var writtenVersion: UInt64 = 0
    @usableFromInline package var throttle: WriteThrottle
    @usableFromInline package var hasListeners = false
    @usableFromInline package var stored: StoredState
    /// How many `update`s of the cell are running, on any thread (see ``UpdatesOnThisThread``).
    @usableFromInline package var updaters: UInt16 = 0
    /// Incremented on every change, local or adopted: an `update` commits only if it is unchanged since its read.
    @usableFromInline package var changeCount: UInt32 = 0
    /// The thread running the cell's job, or 0 when none runs.
    @usableFromInline package var busyThread: UInt = 0
    /// Listeners, the last error, waiting flushes and rarely set flags: allocated when first needed.
    @usableFromInline package var extras: CellExtras<T>?
    /// The value, last: the fields before it then have the same offsets whatever the value's type.
    @usableFromInline package var value: T

    @inlinable @inline(__always)  // into the cell's init, which looks up the metadata of this type already
    package init(value: T, stored: StoredState, throttle: WriteThrottle) {
        self.value = value
        self.stored = stored
        self.throttle = throttle
    }

    @inline(__always) package var isPending: Bool { version != writtenVersion }

    /// Whether the cell has work for its backer: a change to write or a default to save.
    @inline(__always) package var hasWork: Bool { isPending || stored == .defaultUnsaved }

    @inline(__always) package var isBusy: Bool { busyThread != 0 }

    @inline(__always) package var isOrphaned: Bool { extras?.orphaned ?? false }

    package mutating func withExtras<R>(_ body: (CellExtras<T>) -> R) -> R {
        if let extras { return body(extras) }
        let made = CellExtras<T>()
        extras = made
        return body(made)
    }

    /// A change made by this process: swaps `value` in (the old one left in `value`, released after the lock).
    @inlinable
    package mutating func changeLocally(to value: inout T) -> (needsTick: Bool, drain: Bool) {
        swap(&self.value, &value)
        version &+= 1
        changeCount &+= 1
        return (throttle.needsTick, hasListeners && queueNotification())
    }

    /// Queues the value for every listener (or `listener`); returns whether the caller must drain after the lock.
    @usableFromInline
    package mutating func queueNotification(for listener: UInt64? = nil) -> Bool {
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
    package static var notificationBacklog: Int { 256 }

    /// The next notifications to deliver, with their listeners; `nil` (and draining over) when none is left.
    package mutating func takeNotifications() -> (
        values: [(value: T, listener: UInt64?)], listeners: [UInt64: @Sendable (T) -> Void]
    )? {
        guard hasNotificationsLeft(), let extras else { return nil }
        defer { extras.pendingNotifications = [] }
        return (extras.pendingNotifications, extras.listeners)
    }

    /// Whether notifications were queued since the last batch was taken; when none were, draining is over.
    package mutating func hasNotificationsLeft() -> Bool {
        guard let extras, !extras.pendingNotifications.isEmpty else {
            extras?.draining = false
            return false
        }
        return true
    }

    // MARK: Starting jobs

    /// The job for the pending work (changes up to `target`), marking the cell busy; an unknown stored value is read.
    package mutating func startWork(on thread: UInt, now: UInt64, upTo target: UInt64? = nil) -> CellJob<T>? {
        let job: CellJob<T>
        if isPending && target.map({ writtenVersion < $0 }) ?? true {
            job = stored == .unknown ? .reread(version: version) : .write(value, version: version)
        } else if stored == .defaultUnsaved && !isPending {
            job = .createDefault(value, version: version)
        } else {
            return nil
        }
        // A read spends the tick that started it and counts as a try: the job's end arms the next after the backoff.
        throttle.writeStarts(now: now)
        busyThread = thread
        return job
    }

    /// A check for an outside change: counted, started (busy) or run after the job; reading an unknown value is a try.
    package mutating func requestCheck(on thread: UInt, now: UInt64) -> CellJob<T>? {
        withExtras { $0.externalChecks += 1 }
        guard !isBusy else {
            withExtras { $0.checkRequested = true }
            return nil
        }
        extras?.checkRequested = false
        busyThread = thread
        guard stored == .unknown else { return .check(version: version) }
        throttle.writeStarts(now: now)
        return .reread(version: version)
    }

    /// What a check scheduled at the end of a job (``JobEffects/scheduleCheck``) does: the check requested while the
    /// job ran, or nothing when a check has run since (it served the request).
    package mutating func requestScheduledCheck(on thread: UInt, now: UInt64) -> CellJob<T>? {
        guard extras?.checkRequested == true else { return nil }
        return requestCheck(on: thread, now: now)
    }

    /// What a tick with `token` does: the pending work, or nothing when stale or busy (the job re-arms when it ends).
    package mutating func startTick(_ token: UInt32, on thread: UInt, now: UInt64, defaultValue: T?) -> CellJob<T>? {
        guard throttle.isArmed, throttle.token == token else { return nil }
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
        let job = startWork(on: thread, now: now)
        // A tick armed with nothing pending is disarmed, or it would keep later changes from arming one.
        if job == nil { throttle.disarm() }
        return job
    }

    /// Whether a failed read may pass if retried: not a too large, irregular or undecodable file (its change is seen).
    package static func isTransient(_ error: WLStorageError) -> Bool {
        switch error.code {
        case .decodingFailed, .valueTooLarge, .notARegularFile: false
        default: true
        }
    }

    /// Has a check tried again after the backoff, unless one is waiting already.
    package mutating func armCheckRetry(_ effects: inout JobEffects) {
        // The backoff counts retries, not events.
        let failures = withExtras { extras -> UInt32? in
            guard !extras.checkRetryArmed else { return nil }
            extras.checkRetryArmed = true
            extras.failedChecks &+= 1
            return extras.failedChecks
        }
        if let failures { effects.checkRetry = WriteThrottle.retryDelay(afterFailures: failures, interval: 0) }
    }

    /// The retry of a check armed by ``armCheckRetry(_:)`` is due: another may be armed from now on.
    package mutating func checkRetryDue() {
        extras?.checkRetryArmed = false
    }

    /// Replaces the last error (the old one released after the lock), keeping `storedByAnotherVersion` in step.
    @inline(__always)  // the common case, nothing to clear, without a call that would look up this type
    package mutating func setLastError(_ error: WLStorageError?, _ effects: inout JobEffects) {
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
    package mutating func recordMisuse(_ error: WLStorageError, _ effects: inout JobEffects) {
        setLastError(error, &effects)
        extras?.misuseVersion = version
    }

    /// Whether a removal of unknown fields has work: not, with nothing pending, over another version's value nor before
    /// what is stored could be read (the value is then the default, which would replace it).
    package var removesUnknownFields: Bool {
        isPending || (stored != .unknown && extras?.storedByAnotherVersion != true)
    }

    /// Whether a write started now drops the stored members the type does not know: a removal of them waits.
    package var dropsUnknownFields: Bool { extras?.dropVersion.map { writtenVersion < $0 } ?? false }
}
