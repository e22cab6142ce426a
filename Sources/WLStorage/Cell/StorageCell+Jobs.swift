import Foundation

/// A cell's jobs on its backer: outside-change checks, a job and its follow-ups, and the cell's part of a store batch.
extension StorageCell {
    // MARK: Outside changes

    /// Reads the file if another program changed it and adopts it unless a change is pending (after the job, if busy).
    func checkForExternalChange() { check(ifStillRequested: false) }

    /// Runs a check on this thread unless busy (`ifStillRequested`: only one asked for during a job, not served since).
    @discardableResult
    private func check(ifStillRequested: Bool) -> Bool {
        let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
        // Counted as the check starts: a test that sees the count grow sees the check under way.
        let now = scheduler.now
        let job = state.withLock {
            ifStillRequested ? $0.requestScheduledCheck(on: thread, now: now) : $0.requestCheck(on: thread, now: now)
        }
        guard let job else { return false }
        run(job, chaining: true)
        return true
    }

    /// ``checkForExternalChange()``, over when it returns: an update that stored its value then holds it or newer.
    func checkForExternalChangeBeforeReturning() {
        // A few rounds at most: each waits for a job that other threads may follow with another.
        for _ in 0..<8 {
            if check(ifStillRequested: false) { return }
            guard flush() == .done else { return }
        }
    }

    private func scheduleCheckRetry(after delay: UInt64) {
        scheduler.schedule(after: delay) { [weak self] in
            guard let self else { return }
            state.withLock { $0.checkRetryDue() }
            checkForExternalChange()
        }
    }

    /// Has the file read again, with the backoff, when what is stored is unknown and nothing pending will read it.
    func retryUnknownRead() {
        var effects = JobEffects()
        state.withLock { $0.retryUnknownRead(&effects) }
        if let delay = effects.checkRetry { scheduleCheckRetry(after: delay) }
    }

    var externalChecks: Int { state.withLock { $0.extras?.externalChecks ?? 0 } }

    // MARK: Jobs

    /// Runs `job` and its immediate follow-ups on this thread, busy throughout; returns whether the last succeeded.
    @discardableResult
    func run(_ first: CellJob<T>, chaining: Bool) -> Bool {
        var job = first
        while true {
            let outcome = perform(job)
            guard let next = complete(job, outcome, chaining: chaining) else {
                switch outcome {
                case .failed, .read(.failed): return false
                // The create of a default that found nothing stored saved nothing.
                case .read(.absent), .read(.movedAside): return !job.isCreate
                default: return true
                }
            }
            job = next
        }
    }

    /// Applies how `job` ended, effects after the lock; returns the next job (still busy), or `nil` idle.
    private func complete(_ job: CellJob<T>, _ outcome: JobOutcome<T>, chaining: Bool) -> CellJob<T>? {
        let now = scheduler.now
        var effects = JobEffects()
        // A job that may adopt a value ends the chain: observers (who may use the storage) are told with the cell idle.
        let chains = chaining && !outcome.mayChangeValue
        let defaultValue = outcome.mayNeedDefault ? defaults.value : defaults.ifMade
        let next = state.withLock { state in
            state.finish(
                job, outcome, defaultValue: defaultValue, key: backer.key, now: now, chaining: chains,
                effects: &effects)
        }
        if effects.forgetLastRead { access?.forgetLastRead() }
        if effects.adoptSeen { access?.adoptSeen() }
        if effects.adoptSeen, next == nil { state.withLock { $0.becomeIdle(now: now, effects: &effects) } }
        if effects.valueChanged {
            registrar.withMutation(of: self, keyPath: valueKeyPath) {}
        }
        perform(effects)
        return next
    }

    // MARK: Batches

    /// The pending change as a store batch write (busy until ``finishBatchWrite(_:data:failure:)``), or why not.
    func takeBatchWrite(on thread: UInt) -> BatchTake<BatchWrite> {
        guard let keyBacker, let storeMedium = keyBacker.storeMedium else { return .elsewhere }
        let now = scheduler.now
        let rewritesOnCondition = storeMedium.rewritesOnCondition
        // Copied into a slot, not returned as an optional: another generic type to look up.
        return withUnsafeTemporaryAllocation(of: T.self, capacity: 1) { buffer -> BatchTake<BatchWrite> in
            guard let slot = buffer.baseAddress else { return .elsewhere }
            let (start, dropping) = state.withLock {
                (
                    $0.startBatchWrite(on: thread, now: now, rewritesOnCondition: rewritesOnCondition, into: slot),
                    $0.dropsUnknownFields
                )
            }
            let version: UInt64
            switch start {
            case .taken(let taken): version = taken
            case .idle: return .idle
            case .busyHere: return .busyHere
            case .elsewhere: return .elsewhere
            }
            defer { slot.deinitialize(count: 1) }
            if let written = state.withLock({ $0.takeAdoptedWrite() }) { keyBacker.wrote(written) }
            let data: Data
            do throws(WLStorageError) {
                data = try keyBacker.encode(slot.pointee, dropping: dropping)
            } catch {
                _ = finishBatchWrite(version, data: Data(), failure: error)
                return .elsewhere
            }
            // A change left to be written on its own is given back, with the cell busy so that no job ends meanwhile.
            let condition = keyBacker.batchCondition(data)
            if case .onItsOwn = condition {
                giveBackBatchWrite()
                return .elsewhere
            }
            let write = WLStorageStoreWrite(key: storeMedium.storedKey, data: data)
            return .taken(BatchWrite(write: write, version: version, condition: condition))
        }
    }

    /// Ends a batch write taken and not made, or (`unsure`) of unknown outcome: the change stays pending, for the cell's
    /// own flush, and after such a write, as after its own, another program's later change of a field wins.
    func giveBackBatchWrite(unsure batch: BatchWrite? = nil) {
        if let batch, case .ifItHolds(let over) = batch.condition {
            let data = batch.write.data
            keyBacker?.known.withLock { $0.rare.unsure = UnsureWrite(sent: data, own: data, over: over) }
        }
        var effects = JobEffects()
        state.withLock { $0.becomeIdle(now: scheduler.now, effects: &effects) }
        perform(effects)
    }

    /// Ends the batch write of `version`, as `data` (written when `failure` is `nil`); returns whether work is left.
    func finishBatchWrite(_ version: UInt64, data: Data, failure: WLStorageError?) -> Bool {
        if failure == nil { keyBacker?.wrote(data) }
        let now = scheduler.now
        var effects = JobEffects()
        let done = state.withLock { $0.finishBatchWrite(version, failure: failure, now: now, effects: &effects) }
        perform(effects)
        return !done
    }

    /// Calls the backer for `job`, outside the lock, with the cell busy on this thread.
    private func perform(_ job: CellJob<T>) -> JobOutcome<T> {
        // What an update stored while another job ran is recorded as written before the backer is used again.
        if let written = state.withLock({ $0.takeAdoptedWrite() }) { keyBacker?.wrote(written) }
        switch job {
        case .write(let value, let version):
            do {
                let (rewrites, dropping) = state.withLock { ($0.isRewrite(version), $0.dropsUnknownFields) }
                // A rewrite replaces only what was read: a change made elsewhere since is read instead.
                if rewrites, let rewritten = try access?.rewrite(value, dropping: dropping) {
                    return rewritten ? .written : .rewriteRefused
                }
                // Where the backer can, the changed fields go onto what the key holds now.
                switch try access?.writeChange(value, dropping: dropping, defaultValue: { defaults.value }) {
                case .written?: return .written
                case .writtenOver?: return .writtenOver
                case .plain?, nil: break
                }
                if let access { try access.write(value, dropping: dropping) } else { try backer.write(value: value) }
                return .written
            } catch {
                return .failed(WLStorageError(wrapping: error, key: backer.key))
            }
        case .createDefault(let value, _):
            guard let access else { return .created }
            do {
                if try access.create(value: value) { return .created }
                let found = access.readStored(decoding: decoding)
                // An empty file stands for nothing stored, but it is not replaced by a default.
                if case .absent = found, access.entryExists { return .created }
                // Not the base until the cell takes it: a change of the default made meanwhile goes onto it.
                if case .anotherVersion = found {} else { keyBacker?.known.withLock { $0.readAsSeen() } }
                return .read(found)
            } catch {
                return .failed(WLStorageError(wrapping: error, key: backer.key))
            }
        case .reread:
            if let access { return .read(access.readStored(decoding: decoding)) }
            return .read(backer.readResult { defaultValue })
        case .check:
            guard let access else { return .checked(.unchanged) }
            do {
                return .checked(try access.readExternalChange(decoding: decoding))
            } catch {
                return .reported(error)
            }
        }
    }

    /// Does what a finished job left to do, outside the lock.
    func perform(_ effects: JobEffects) {
        // Waiting flushes are woken before listeners run: a handler on this thread may be slow.
        for waiter in effects.waiters { waiter.signal() }
        if effects.drainNotifications { drainNotifications() }
        for error in effects.errors { WLStorageSystem.report(error) }
        if let tick = effects.tick { schedule(tick) }
        if let delay = effects.checkRetry { scheduleCheckRetry(after: delay) }
        if effects.scheduleCheck {
            scheduler.schedule(after: 0) { [weak self] in self?.check(ifStillRequested: true) }
        }
        if effects.releaseOrphan { Runtime.shared.registry.letGo(self) }
    }
}
