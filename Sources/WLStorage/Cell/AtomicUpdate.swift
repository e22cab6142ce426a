import Foundation
import Observation

extension StorageCell {
    /// Runs `body` on a copy of the value outside every lock, again if the value changed, and stores what it leaves.
    @inlinable
    func update<R>(_ body: (inout T) throws -> R) rethrows -> R {
        if updatesInStore, let stored = try updateInStore(body) { return stored }
        return try updateLocally(body)
    }

    @inlinable
    func updateLocally<R>(_ body: (inout T) throws -> R) rethrows -> R {
        let cell = ObjectIdentifier(self)
        guard UpdatesOnThisThread.begin(cell) else {
            var copy = get()
            refuseChangeInsideUpdate(what: "update")
            return try body(&copy)
        }
        var first = true
        var attempts = 0
        while true {
            if !first { _ = UpdatesOnThisThread.begin(cell) }
            let (start, count) = state.withLock { [first] in $0.startUpdate(counting: first) }
            first = false
            var value = start
            let result: R
            do {
                defer { UpdatesOnThisThread.end() }
                result = try body(&value)
            } catch {
                state.withLock { $0.endUpdate() }
                throw error
            }
            // After the closure returned: what observers of the commit do is not from inside it.
            let committed = registrar.withMutation(of: self, keyPath: valueKeyPath) {
                let outcome = state.withLock { $0.commitUpdate(&value, ifUnchangedSince: count) }
                guard let (needsTick, drain) = outcome else { return false }
                if needsTick { armTick() }
                if drain { drainNotifications() }
                return true
            }
            if committed { return result }
            attempts += 1
            if attempts > 2 { sched_yield() }
        }
    }

    /// The backer of a key in a store other than a directory, and its medium: what an update writes through.
    typealias StoreKey = (backer: WLStorageDefaultBacker<T>, medium: StoreMedium)

    /// The update in a ``WLStorageConditionalStore`` (`nil` for other backers, and inside an update of the cell),
    /// atomic for every process: the pending change written, the key read, `body` run, the result stored only while the
    /// key holds what was read (or its version), else all again. Never turned into a set, which would replace others'
    /// writes: an unreachable store (after ``unreachableStoreRetry``) or an unknown outcome is reported and not made;
    /// only undecodable bytes or an unencodable result make it a set.
    @usableFromInline
    func updateInStore<R>(_ body: (inout T) throws -> R) rethrows -> R? {
        let cell = ObjectIdentifier(self)
        guard let keyBacker, let medium = keyBacker.storeMedium, !UpdatesOnThisThread.contains(cell) else { return nil }
        let capabilities = medium.capabilities
        guard let store = capabilities.conditional else { return nil }
        let stored: R?
        do {
            _ = state.withLock { $0.startUpdate(counting: true) }
            defer { state.withLock { $0.endUpdate() } }
            switch try storeUpdate(body, in: (keyBacker, medium), store: store, versioned: capabilities.versioned) {
            case .done(let result), .notMade(let result?):
                stored = result
            case .notMade(nil):
                // The closure never ran: it runs once on a copy for its result, which is not stored.
                var copy = get()
                _ = UpdatesOnThisThread.begin(cell)
                defer { UpdatesOnThisThread.end() }
                stored = try body(&copy)
            case .inProcess:
                stored = nil
            }
        }
        if let stored { return stored }
        return try updateLocally(body)
    }

    /// How a store update ended: stored or unknown (not made again), made here as a set, or not made (store unreached).
    private enum StoreUpdateEnd<R> {
        case done(R)
        case inProcess
        case notMade(R?)
    }

    /// How long an update retries an unreachable store (a server's restart or failover) before reporting it not made.
    static var unreachableStoreRetry: Duration { .seconds(10) }

    /// Whether a store failure may pass on retry: a failed read or write, not undecodable bytes, size or settings.
    private static func mayPass(_ error: WLStorageError) -> Bool {
        [.readFailed, .writeFailed, .backerFailed].contains(error.code)
    }

    /// Runs the update against the store until a conditional write stores it.
    private func storeUpdate<R>(
        _ body: (inout T) throws -> R, in key: StoreKey, store: any WLStorageConditionalStore,
        versioned: (any WLStorageVersionedStore)?
    ) rethrows -> StoreUpdateEnd<R> {
        var attempts = 0
        var setsMeanwhile = 0
        var lastResult: R?
        var unreachable: (since: ContinuousClock.Instant, failures: Int)?
        /// Whether to try again after `error`, after a pause; else the update is reported as not made.
        func tryAgain(after error: WLStorageError) -> Bool {
            let now = ContinuousClock.now
            let since = unreachable?.since ?? now
            let failures = (unreachable?.failures ?? 0) + 1
            unreachable = (since, failures)
            guard Self.mayPass(error), since.duration(to: now) < Self.unreachableStoreRetry else {
                // A refusal that no retry passes (a value too large for the store) keeps its code, and says so.
                let passing = Self.mayPass(error)
                let why = passing ? "\(key.medium.identity) did not store it" : "\(key.medium.identity) refused it"
                record(
                    WLStorageError(
                        code: passing ? .writeFailed : error.code,
                        message: "the update was not made: \(why) (\(error.message)); the value is left as it was, and"
                            + " the update is not made later",
                        key: backer.key, underlying: error))
                return false
            }
            usleep(UInt32(min(10_000 << min(failures - 1, 6), 500_000)))
            return true
        }
        while true {
            // The pending change first, but not a rewrite of what was read, which the update makes moot.
            if state.withLock({ !$0.onlyRewritePending }) {
                guard flush() == .done else {
                    let error =
                        lastError
                        ?? WLStorageError(code: .writeFailed, message: "the pending change could not be written")
                    guard tryAgain(after: error) else { return .notMade(lastResult) }
                    continue
                }
            }
            let count = state.withLock { $0.changeCount }
            let read: UpdateRead
            do {
                read = try readForUpdate(key, versioned: versioned)
            } catch {
                switch error {
                case .unreadable(let error):
                    guard tryAgain(after: error) else { return .notMade(lastResult) }
                    continue
                case .undecodable(let error):
                    record(error)
                    return .inProcess
                }
            }
            // A set came since the flush: written first too, a few times at most.
            if setsMeanwhile < 3, state.withLock({ $0.isPending && !$0.onlyRewritePending }) {
                setsMeanwhile += 1
                continue
            }
            var value = read.value
            let result: R
            do {
                _ = UpdatesOnThisThread.begin(ObjectIdentifier(self))
                defer { UpdatesOnThisThread.end() }
                result = try body(&value)
            }
            lastResult = result
            // A result that cannot be encoded stays in memory, as a set would; the failing write reports it.
            guard let data = try? key.backer.encode(value, replacing: read.bytes) else { return .inProcess }
            // A write whose answer is lost is sent again and found by its tag.
            let outcome =
                if let versioned, let version = read.version {
                    key.medium.write(data, ifVersion: version, through: versioned, key: backer.key)
                } else {
                    key.medium.write(data, ifItHolds: read.bytes, through: store, key: backer.key)
                }
            switch outcome {
            case .stored(let overwritten):
                let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
                let adoption = registrar.withMutation(of: self, keyPath: valueKeyPath) {
                    let (adoption, drain, records) = state.withLock {
                        $0.adoptStoredUpdate(&value, changeCount: count, written: data, on: thread)
                    }
                    // Known as written before a handler told of it writes again (an update of its own), and before a
                    // job takes the value (a set's, written as a change of it): the cell is busy until then.
                    if records {
                        let now = scheduler.now
                        key.backer.wrote(data)
                        var effects = JobEffects()
                        state.withLock { $0.becomeIdle(now: now, effects: &effects) }
                        perform(effects)
                    }
                    if drain { drainNotifications() }
                    return adoption
                }
                switch adoption {
                case .adopted:
                    if overwritten { checkForExternalChangeBeforeReturning() }
                case .changedMeanwhile:
                    // The cell took a value while the closure ran: the key is read again before the update returns.
                    checkForExternalChangeBeforeReturning()
                case .pending:
                    break  // a set made meanwhile is newer, and is written after this
                }
                return .done(result)
            case .refused:
                unreachable = nil
                attempts += 1
                if attempts > 2 { sched_yield() }
            case .notStored(let error):
                guard tryAgain(after: key.medium.failure(error, writing: true, key: backer.key)) else {
                    return .notMade(result)
                }
            case .unknown(let error):
                reportUnknownOutcome(error, in: key.medium)
                return .done(result)
            }
        }
    }

    /// Reports that the update's outcome is unknown: neither made again nor set; the key is read again.
    private func reportUnknownOutcome(_ error: any Error, in medium: StoreMedium) {
        record(
            WLStorageError(
                code: .writeFailed,
                message: "whether the update was stored in \(medium.identity) is not known (its answer was lost, and"
                    + " \(error)); it is not made again, so that it never counts twice, and the storage reads the key"
                    + " again",
                key: backer.key, underlying: error))
        checkForExternalChange()
    }

    /// What an update read: bytes, value (default for nothing), and a tagging store's version (`.some(nil)`: none).
    struct UpdateRead {
        var bytes: Data?
        var value: T
        var version: Int64??
    }

    /// Why an update could not read the key: the store unreachable (tried again), or bytes it cannot decode (a set).
    enum UpdateReadFailure: Error {
        case unreadable(WLStorageError)
        case undecodable(WLStorageError)
    }

    /// Reads the key for an update: with its version from a tagging store (else, reported once, bytes compared).
    private func readForUpdate(
        _ key: StoreKey, versioned: (any WLStorageVersionedStore)?
    ) throws(UpdateReadFailure) -> UpdateRead {
        let bytes: Data?
        var version: Int64??
        do {
            switch try versioned?.readVersioned(key: key.medium.storedKey) {
            case .found(let data, let found)?:
                bytes = data
                version = .some(found)
            case .absent?:
                bytes = nil
                version = .some(nil)
            case .untagged(let error)?:
                if key.medium.firstUntaggedReport() { record(error) }
                bytes = try key.medium.store.read(key: key.medium.storedKey)
            case nil:
                bytes = try key.medium.store.read(key: key.medium.storedKey)
            }
        } catch {
            // What does not open or is too large is not a failure to reach the store.
            if let error = error as? WLStorageError, !Self.mayPass(error) {
                throw .undecodable(
                    WLStorageError(
                        code: .readFailed,
                        message: "the update could not read \(key.medium.identity), so it was made in this process"
                            + " only and is written as a set is: \(error)",
                        key: backer.key, underlying: error))
            }
            throw .unreadable(key.medium.failure(error, writing: false, key: backer.key))
        }
        guard let bytes, !bytes.isEmpty else { return UpdateRead(bytes: bytes, value: defaultValue, version: version) }
        do {
            return UpdateRead(bytes: bytes, value: try decoding.value(of: bytes), version: version)
        } catch {
            let failure = StoredBytes<T>.failure(
                error, bytes, at: key.backer.place, finding: "the update found bytes in \(key.medium.identity) that",
                outcome: ", so it was made in this process only and is written as a set is")
            // The set the update becomes keeps these bytes' members this type does not know, or a copy of them.
            key.backer.willReplace(bytes, undecodable: failure.code == .decodingFailed)
            throw .undecodable(failure)
        }
    }

    /// Reports a set or an update of this storage from inside an update of it, which is not made.
    @usableFromInline
    func refuseChangeInsideUpdate(what: String) {
        UpdatesOnThisThread.reportingOnce {
            record(
                WLStorageError(
                    code: .reentrantCall,
                    message: "\(what) was called on this storage from inside its own update, whose result replaces the"
                        + " value; the \(what) was not made. Change the value through the closure's argument",
                    key: backer.key),
                asMisuse: true)
        }
    }
}
