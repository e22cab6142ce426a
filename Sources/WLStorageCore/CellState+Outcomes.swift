/// How a cell's job ends: a write, a default's save, a read or a check, applied by the last-writer rule.
extension CellState {
    /// Applies how `job` ended; returns the follow-up job to run at once on this thread, or `nil` with the cell idle (or,
    /// when the backer is to adopt what was read, busy until ``becomeIdle(now:effects:)``: no write starts before).
    package mutating func finish(
        _ job: CellJob<T>, _ outcome: JobOutcome<T>, defaultValue: T?, key: String, now: UInt64, chaining: Bool,
        effects: inout JobEffects
    ) -> CellJob<T>? {
        let startVersion: UInt64
        switch job {
        case .write(_, let version), .createDefault(_, let version), .reread(let version), .check(let version):
            startVersion = version
        }
        var followUp: CellJob<T>?
        switch outcome {
        case .written, .writtenOver:
            writeEnded(startVersion, failure: nil, effects: &effects)
            if case .writtenOver = outcome { followUp = .check(version: version) }
        case .rewriteRefused:
            writtenVersion = max(writtenVersion, startVersion)
            stored = .known
            throttle.writeEnded(succeeded: true)
            followUp = .check(version: version)
        case .created:
            if stored == .defaultUnsaved { stored = .known }
            throttle.writeEnded(succeeded: true)
            setLastError(nil, &effects)
        case .failed(let error):
            writeEnded(startVersion, failure: error, effects: &effects)
        case .reported(let error):
            recordError(error, &effects)
            if error.code == .storedByAnotherVersion && onlyRewriteOrDropPending {
                // Another version stored since the read: the rewrite gives way, even one marked since the check began.
                writtenVersion = version
            }
            if Self.isTransient(error) {
                // Another program's change may be there, unseen: the check is retried with the backoff.
                armCheckRetry(&effects)
            }
        case .checked(let change):
            extras?.failedChecks = 0
            if applyChange(change, startVersion: startVersion, defaultValue: defaultValue, effects: &effects) {
                // The check read another's change while this process's was written, and did not adopt it: a check at
                // once, the read not taken as seen, tells which the key holds last.
                effects.forgetLastRead = true
                followUp = .check(version: version)
            }
        case .read(let result):
            // A read that worked ends an episode of failed checks.
            if case .failed = result {} else { extras?.failedChecks = 0 }
            followUp = applyRead(
                result, job: job, startVersion: startVersion, key: key, defaultValue: defaultValue, effects: &effects)
        }
        if followUp == nil, chaining, extras?.checkRequested == true, extras?.waiters.isEmpty ?? true {
            extras?.checkRequested = false
            followUp = stored == .unknown ? .reread(version: version) : .check(version: version)
        }
        if let followUp {
            switch followUp {
            case .write, .reread: throttle.writeStarts(now: now)
            case .createDefault, .check: break
            }
            return followUp
        }
        if !effects.adoptSeen { becomeIdle(now: now, effects: &effects) }
        return nil
    }

    /// How the batch write of `startVersion`'s change ended (written when `failure` is `nil`); `true`: no work left.
    @inline(__always)
    package mutating func finishBatchWrite(
        _ startVersion: UInt64, failure: WLStorageError?, now: UInt64, effects: inout JobEffects
    ) -> Bool {
        writeEnded(startVersion, failure: failure, effects: &effects)
        becomeIdle(now: now, effects: &effects)
        return !hasWork
    }

    /// A write of the change of `startVersion` ended: written when `failure` is `nil`.
    @inline(__always)
    private mutating func writeEnded(_ startVersion: UInt64, failure: WLStorageError?, effects: inout JobEffects) {
        guard let failure else {
            writtenVersion = max(writtenVersion, startVersion)
            stored = .known
            throttle.writeEnded(succeeded: true)
            if let misuse = extras?.misuseVersion, startVersion > misuse { extras?.misuseVersion = nil }
            setLastError(nil, &effects)
            return
        }
        throttle.writeEnded(succeeded: false)
        recordError(failure, &effects)
    }

    /// The job ended with nothing after it: idle, waiting flushes woken, the throttle armed for work left.
    @inline(__always)
    package mutating func becomeIdle(now: UInt64, effects: inout JobEffects) {
        busyThread = 0
        if let extras {
            effects.waiters = extras.waiters
            extras.waiters = []
            effects.scheduleCheck = extras.checkRequested
        }
        if hasWork {
            effects.tick = throttle.arm(now: now, force: isOrphaned || stored == .defaultUnsaved)
        } else if isOrphaned {
            extras?.orphaned = false
            throttle.endUrgency()
            effects.releaseOrphan = true
        }
    }

    /// A read: a reread after a failed read, or a default create that found something stored.
    private mutating func applyRead(
        _ result: ReadResult<T>, job: CellJob<T>, startVersion: UInt64, key: String, defaultValue: T?,
        effects: inout JobEffects
    ) -> CellJob<T>? {
        let isCreate = job.isCreate
        switch result {
        case .failed(let error):
            // Unless an update stored a value meanwhile: what is stored is known then, and changes since build on it.
            if stored != .known { stored = .unknown }
            throttle.writeEnded(succeeded: false)
            recordError(error, &effects)
            if !isPending && Self.isTransient(error) { armCheckRetry(&effects) }
            return nil
        case .movedAside where isCreate, .absent where isCreate:
            if case .movedAside(let error) = result { effects.errors.append(error) }
            throttle.writeEnded(succeeded: false)
            return nil
        case .anotherVersion(let error):
            stored = .known
            if isCreate { throttle.writeEnded(succeeded: true) }
            recordError(error, &effects)
            // Replaced only by a change of the value, not by a rewrite or a removal of unknown fields.
            if onlyRewriteOrDropPending { writtenVersion = version }
            if !isCreate && isPending { return .write(value, version: version) }
            return nil
        case .movedAside, .absent:
            let movedAside: WLStorageError? = if case .movedAside(let error) = result { error } else { nil }
            if let movedAside { effects.errors.append(movedAside) }
            stored = .known
            setLastError(movedAside, &effects)
            if takeRemovalAfterUnreadable(defaultValue: defaultValue, effects: &effects) { return nil }
            if isPending { return .write(value, version: version) }
            if version == 0 { stored = .defaultUnsaved }  // the cell still holds its default: save it
            return nil
        case .value(let found), .reshaped(let found, _, _):
            stored = .known
            setLastError(nil, &effects)
            var rewrites = false
            if case .reshaped(_, let rewrite, let note) = result {
                if let note { recordError(note, &effects) }
                rewrites = rewrite
            }
            if isCreate {
                throttle.writeEnded(succeeded: true)
                guard !isPending else { return nil }
            } else if onlyRewritePending {
                writtenVersion = version
            } else if isPending {
                // The changes were based on a value that was not the stored one: the stored value wins.
                writtenVersion = version
                let error = WLStorageError(
                    code: .changeDiscarded,
                    message: "the stored value could not be read, so the changes made since were based on another"
                        + " value; the stored value has been read now and replaces them",
                    key: key)
                recordError(error, &effects)
            }
            extras?.unreadableSinceKnown = false
            adopt(found, effects: &effects)
            effects.adoptSeen = true
            if rewrites { markRewrite() }
            return nil
        }
    }

    /// Makes `error` the last error, reported after the lock; not again while an update waits (it reports its end).
    private mutating func recordError(_ error: WLStorageError, _ effects: inout JobEffects) {
        let last = extras?.lastError
        let again = updaters > 0 && last?.code == error.code && last?.message == error.message
        setLastError(error, &effects)
        if !again { effects.errors.append(error) }
    }

    /// After unreadable bytes replaced a read value, a read finding nothing is taken as a removal; returns whether so.
    private mutating func takeRemovalAfterUnreadable(defaultValue: T?, effects: inout JobEffects) -> Bool {
        guard extras?.unreadableSinceKnown == true, let defaultValue else { return false }
        extras?.unreadableSinceKnown = false
        if onlyRewritePending { writtenVersion = version }
        guard !isPending else { return false }
        adopt(defaultValue, effects: &effects)
        return true
    }

    /// A value read from the store replaces the value (the old one leaves through `effects`); observers are told.
    private mutating func adopt(_ found: T, effects: inout JobEffects) {
        effects.released.append(value)
        value = found
        changeCount &+= 1
        effects.valueChanged = true
        if hasListeners && queueNotification() { effects.drainNotifications = true }
    }

    /// Makes the value read in an earlier shape pending, to write back; an outside change before it wins.
    package mutating func markRewrite() {
        version &+= 1
        let version = self.version
        withExtras { $0.rewriteVersion = version }
    }

    /// Whether the only change pending is the rewrite of a value read in an earlier type's shape.
    @inline(__always) package var onlyRewritePending: Bool { isPending && extras?.rewriteVersion == version }

    /// Whether what is pending writes no change of the value: a rewrite, or a removal of unknown fields.
    package var onlyRewriteOrDropPending: Bool {
        guard isPending, let extras else { return false }
        if extras.rewriteVersion == version { return true }
        return extras.dropVersion == version && writtenVersion >= extras.dropRidesOn ?? 0
    }

    /// Another program's change, adopted by the last-writer rule: a local change pending or made since the check
    /// started is written after it; a pending rewrite gives way. Returns whether the key must be checked again.
    private mutating func applyChange(
        _ change: ExternalChange<T>, startVersion: UInt64, defaultValue: T?, effects: inout JobEffects
    ) -> Bool {
        if case .unreadable(let error) = change {
            stored = .unknown
            withExtras { $0.unreadableSinceKnown = true }
            recordError(error, &effects)
            return false
        }
        if case .unchanged = change { return false }
        let onlyRewrite = onlyRewritePending
        guard !isPending || onlyRewrite else { return false }
        // A rewrite marked since the check began rewrites the value read before what the check found: it gives way too.
        guard version == startVersion || onlyRewrite else { return !isPending }
        switch change {
        case .unchanged, .unreadable:
            return false
        case .changed(let found):
            adopt(found, effects: &effects)
        case .removed:
            guard let defaultValue else { return false }
            adopt(defaultValue, effects: &effects)
        }
        effects.adoptSeen = true
        if onlyRewrite { writtenVersion = version }
        // Nothing is left to save: a removal is respected, not undone by saving the default again.
        stored = .known
        setLastError(nil, &effects)
        return false
    }
}
