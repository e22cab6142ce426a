import Dispatch
import Foundation

/// The transitions of a storage's requests, each under the cell's lock, returning what to do after it.
extension CellState {
    /// What a set does: made (a tick needed? notifications to drain?), or not while an update of the cell runs.
    @usableFromInline
    package enum SetOutcome {
        case changed(needsTick: Bool, drain: Bool)
        case updating
    }

    /// A set of `value`, unless an update runs. The value replaced leaves in `value`.
    @inlinable
    package mutating func set(_ value: inout T) -> SetOutcome {
        if updaters != 0 { return .updating }
        let (needsTick, drain) = changeLocally(to: &value)
        return .changed(needsTick: needsTick, drain: drain)
    }

    // MARK: Updates

    /// An update's closure is about to run (again): its start value, and the change count to find unchanged to commit.
    @inlinable
    package mutating func startUpdate(counting: Bool) -> (value: T, changeCount: UInt32) {
        if counting { updaters &+= 1 }
        return (value, changeCount)
    }

    /// An update ends without a commit: its closure threw, or it was made in the store.
    @inlinable
    package mutating func endUpdate() {
        updaters &-= 1
    }

    /// An update's commit of `value`, made only if the value is unchanged since `count`; `nil` when it is to run again.
    @inlinable
    package mutating func commitUpdate(_ value: inout T, ifUnchangedSince count: UInt32) -> (
        needsTick: Bool, drain: Bool
    )? {
        guard changeCount == count else { return nil }
        updaters &-= 1
        return changeLocally(to: &value)
    }

    /// What became of a value an update stored: adopted, not (an outside change adopted since), or a newer one pending.
    package enum StoredUpdate {
        case adopted
        case changedMeanwhile
        case pending
    }

    /// Takes `value`, just stored by an update as `data`, as the value and as written, unless the value changed since
    /// `count` or a change is pending (the value replaced leaves in `value`). Adopted, the cell is busy on `thread`
    /// until the caller records `data` (`records`); a job in flight leaves that to the next job
    /// (``takeAdoptedWrite()``).
    package mutating func adoptStoredUpdate(
        _ value: inout T, changeCount count: UInt32, written data: Data, on thread: UInt
    ) -> (StoredUpdate, drain: Bool, records: Bool) {
        let onlyRewrite = onlyRewritePending
        // A removal of unknown fields alone is no change of the value: it is written with the update's value.
        let onlyDrop = !onlyRewrite && onlyRewriteOrDropPending
        if isPending && !onlyRewrite && !onlyDrop { return (.pending, false, false) }
        if onlyRewrite { writtenVersion = version }
        guard changeCount == count else { return (.changedMeanwhile, false, false) }
        swap(&self.value, &value)
        changeCount &+= 1
        // A new version, written already: a check that read the key before this update wrote it does not adopt that.
        version &+= 1
        writtenVersion = version
        stored = .known
        if onlyDrop {
            // The removal takes the update's version, left to write: a flush waiting for it waits for its write.
            writtenVersion = version &- 1
            let version = self.version
            withExtras { extras in
                extras.dropVersion = version
                extras.dropRidesOn = nil
            }
        }
        let records = !isBusy
        if records { busyThread = thread }
        if records { extras?.adoptedWrite = nil } else { withExtras { $0.adoptedWrite = data } }
        return (.adopted, hasListeners && queueNotification(), records)
    }

    /// The bytes an update stored and the cell took while a job ran, to record as written before the backer is used.
    package mutating func takeAdoptedWrite() -> Data? {
        defer { extras?.adoptedWrite = nil }
        return extras?.adoptedWrite
    }

    // MARK: Flushes and batches

    /// A flush's next step: run a job, wait for the one in flight (then ask again), done, or reentrant (its own job).
    package enum FlushStep {
        case run(CellJob<T>)
        case wait(DispatchSemaphore)
        case done
        case reentrant
    }

    /// The next step of a flush on `thread` of what was set up to version `target` (set by the first step).
    package mutating func flushStep(on thread: UInt, now: UInt64, upTo target: inout UInt64?, waitingForJobs: Bool)
        -> FlushStep
    {
        // Up to the latest version at the call, and a rewrite read meanwhile: no change of the caller is left behind.
        var goal = target ?? version
        if onlyRewritePending { goal = max(goal, version) }
        target = goal
        if busyThread == thread { return .reentrant }
        if isBusy {
            guard waitingForJobs else { return .done }
            let waiter = DispatchSemaphore(value: 0)
            withExtras { $0.waiters.append(waiter) }
            return .wait(waiter)
        }
        return startWork(on: thread, now: now, upTo: goal).map(FlushStep.run) ?? .done
    }

    /// The pending change for a batch of its store, taken at once into `slot`, the cell busy on `thread`. A rewrite,
    /// and in a `rewritesOnCondition` store a removal of unknown fields alone, is left to its own write, which gives
    /// way to another program's unheard change: a batch would write the value whole over it.
    @inline(__always)  // into the cell's critical section
    package mutating func startBatchWrite(
        on thread: UInt, now: UInt64, rewritesOnCondition: Bool, into slot: UnsafeMutablePointer<T>
    ) -> BatchTake<UInt64> {
        if busyThread == thread { return .busyHere }
        if isBusy { return .elsewhere }
        guard hasWork else { return .idle }
        guard isPending, stored == .known else { return .elsewhere }
        if onlyRewritePending || (rewritesOnCondition && onlyRewriteOrDropPending) { return .elsewhere }
        throttle.writeStarts(now: now)
        busyThread = thread
        slot.initialize(to: value)
        return .taken(version)
    }

    // MARK: Storages joining and leaving

    /// Another storage joins with `interval`: the shortest holds; returns a sooner tick for a waiting change.
    package mutating func join(interval: UInt64?, now: UInt64) -> (token: UInt32, delay: UInt64)? {
        guard throttle.lower(to: interval), hasWork, !isBusy else { return nil }
        throttle.disarm()
        return throttle.arm(now: now, force: stored == .defaultUnsaved)
    }

    /// The last storage is gone with work left: kept and written at once with backoff; returns whether orphaned now.
    package mutating func orphan(now: UInt64) -> (orphaned: Bool, tick: (token: UInt32, delay: UInt64)?) {
        guard hasWork, !isOrphaned else { return (false, nil) }
        withExtras { $0.orphaned = true }
        throttle.makeUrgent()
        return (true, isBusy ? nil : throttle.arm(now: now, force: true))
    }
}

extension CellState {
    // MARK: What is stored

    /// The value read at open in an earlier shape is to be written back as a change; returns whether a tick is needed.
    /// Not once anything happened to the cell: a change of this process carries the new shape, and what a check found
    /// since is not to be replaced by the value read before it.
    package mutating func rewriteRead() -> Bool {
        guard changeCount == 0, !isPending, stored == .known, extras?.storedByAnotherVersion != true else {
            return false
        }
        markRewrite()
        return throttle.needsTick
    }

    /// Whether the write of `version` only rewrites the value read in an earlier type's shape.
    package func isRewrite(_ version: UInt64) -> Bool { extras?.rewriteVersion == version }

    /// The stored object's unknown members are to go (a change of what is stored, not of the value); returns whether it
    /// is to be written, as ``removesUnknownFields`` may have turned false. It goes with a change of the value not
    /// written yet, and alone again once that change is written on its own.
    @discardableResult
    package mutating func dropUnknownFields() -> Bool {
        guard removesUnknownFields else { return false }
        let changeOfValue = isPending && !onlyRewriteOrDropPending ? version : nil
        version &+= 1
        let version = self.version
        withExtras { extras in
            extras.dropVersion = version
            extras.dropRidesOn = changeOfValue
        }
        return true
    }

    // MARK: Listeners

    /// Adds `listener`; returns its id, and whether notifications (the current value, if asked) wait to be drained.
    package mutating func addListener(
        _ listener: @escaping @Sendable (T) -> Void, sendingCurrent: Bool
    ) -> (id: UInt64, drain: Bool) {
        hasListeners = true
        let id = withExtras { extras in
            let id = extras.nextListenerID
            extras.nextListenerID &+= 1
            extras.listeners[id] = listener
            return id
        }
        return (id, sendingCurrent && queueNotification(for: id))
    }

    /// Removes the listener `id`; returns it, to be released after the lock.
    package mutating func removeListener(_ id: UInt64) -> (@Sendable (T) -> Void)? {
        guard let extras else { return nil }
        let removed = extras.listeners.removeValue(forKey: id)
        hasListeners = !extras.listeners.isEmpty
        return removed
    }

    // MARK: Checks

    /// What is stored could not be read, and nothing pending will read it: a check is retried with the backoff.
    package mutating func retryUnknownRead(_ effects: inout JobEffects) {
        guard stored == .unknown, !isPending else { return }
        armCheckRetry(&effects)
    }
}
