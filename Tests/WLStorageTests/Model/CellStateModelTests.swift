// The cell's state machine driven alone, without files, threads or clocks: a world of one stored value that this
// process and another program write, a cell whose every transition is a call of `CellState`, and the glue of
// `StorageCell` (jobs on the backer, effects after the lock) played by the world. Every interleaving of sets, ticks,
// flushes, checks, outside writes and removals, and failed writes, reads and checks, is one seed; the guarantees are
// checked after every step and once the world is quiet.
import Foundation
import Testing
import WLStorageFleet
import WLStorageTestSupport

@testable import WLStorage

/// One run of the world: a seed's events, then a quiet end in which nothing fails.
struct CellStateWorld {
    /// A job of the cell, started on `thread`; `outcome` once it has called the backer.
    struct Flight {
        var job: CellJob<Int>
        var thread: UInt
        var outcome: JobOutcome<Int>?
        /// A flush's job runs without chaining to what may change the value (`run(_:chaining: false)`).
        var chaining: Bool
        /// When the job started.
        var start: UInt64
    }

    /// A flush on its own thread: its target version, and what it waits for.
    struct Flush {
        var target: UInt64?
        var waiter: DispatchSemaphore?
        var failed = false
    }

    enum Timer {
        case tick(UInt32)
        case check
        /// The check a job left requested when it ended, run as the cell runs it: only while still requested.
        case scheduledCheck
        case checkRetry
    }

    /// What the key holds: a value of this version, one in an earlier shape (read through a migration), bytes another
    /// version stored (JSON this one cannot decode), another key's secret, or nothing.
    enum Held: Equatable, CustomStringConvertible {
        case value(Int)
        case earlierShape(Int)
        case anotherVersion(Int)
        case secret(Int)

        var value: Int? {
            switch self {
            case .value(let value), .earlierShape(let value): value
            case .anotherVersion, .secret: nil
            }
        }

        var description: String {
            switch self {
            case .value(let value): "\(value)"
            case .earlierShape(let value): "\(value) in an earlier shape"
            case .anotherVersion(let id): "another version's bytes \(id)"
            case .secret(let id): "another key's secret \(id)"
            }
        }
    }

    static let defaultValue = 0
    static let background: UInt = 1
    static let flushing: UInt = 2
    static let updating: UInt = 3

    var random: SplitMix64
    var state: CellState<Int>
    var now: UInt64 = 1_000
    /// What the key holds, and its revision (one more at every write by anyone).
    var stored: Held?
    var revision = 0
    /// The backer's version seen last: 0 none, -1 a read forgotten; and whether it was read (not written).
    var known = 0
    var knownWasRead = false
    var timers: [(due: UInt64, timer: Timer)] = []
    var flight: Flight?
    /// Failed jobs in a row whose retry was armed to run at once.
    var immediateRetries = 0
    /// The cell's change taken into a store batch: its version and value, and whether the batch's write failed.
    var batch: (version: UInt64, value: Int, failed: Bool?)?
    /// An update whose closure runs: the value it started from and the change count to find unchanged.
    var update: (start: Int, count: UInt32)?
    /// An update made in the store by a conditional write: the change count when it read the key, and the revision it
    /// read (the write is refused if another came since).
    var storeUpdate: (count: UInt32, revision: Int)?
    var flush: Flush?
    /// The value of the last set, the last outside write (`nil` inside: a removal), and which came last.
    var lastSet: Int?
    var lastOutside: Held??
    var setCameLast = false
    /// Whether the cell reported a change of this process discarded since the last one: made while what is stored was
    /// unknown, it gives way to the value read once known (``WLStorageError/Code/changeDiscarded``).
    var discardedSinceLastSet = false
    /// A store update's value that may end as the value instead of the last change (stored while that change was
    /// pending: whichever reached the key last wins).
    var updateStoredMeanwhile: Int?
    /// The value the last store update of this process stored while a newer change was pending: when that change is
    /// discarded (made while what is stored was unknown), the update's value stands.
    var updateStoredBeforeDiscard: Int?
    /// Whether the last thing this process did was a removal of unknown fields, which gives way to another version's
    /// bytes seen before it is written.
    var dropCameLast = false
    /// The cell's version after the last change of this process (a set or an update): another version's bytes, once
    /// read, are replaced only by a write that carries such a change, not by a rewrite or a removal of unknown fields.
    var lastChangeVersion: UInt64 = 0
    /// The revision a value in an earlier shape was read at (at open, or by a read since), or this process wrote last:
    /// a rewrite replaces only that, never another program's value stored since.
    var readInEarlierShape = 0
    var nextSet = 1
    var nextOutside = -1
    var failing = true
    /// What happened, kept only when asked (a failing seed is run again to tell it), and the guarantees seen broken.
    final class Journal {
        let tracing: Bool
        var trace: [String] = []
        var violations: [String] = []
        init(tracing: Bool) { self.tracing = tracing }
    }

    let journal: Journal
    /// Rounds of notifications to deliver to the cell's one listener (a drain runs at most one at a time), and the
    /// values it was given.
    var drains = 0
    var delivered: [Int] = []
    /// Whether the last storage of the cell was released, whether the cell was kept (orphaned) for its work, and how
    /// many times it was let go.
    var released = false
    /// Whether the storage that opened the key on a value in an earlier shape has yet to mark it for the rewrite.
    var rewriteAtOpenDue = false
    var orphaned = false
    var letGo = 0

    init(seed: UInt64, tracing: Bool = false) {
        journal = Journal(tracing: tracing)
        random = SplitMix64(seed: seed)
        let interval: UInt64? = [0, 1_000_000_000, nil][Int(random.next() % 3)]
        switch random.next() % 4 {
        case 3:
            // Read in an earlier shape: the storage's init marks it to be written back, after it registered the cell,
            // so another storage of the key may join and set in between.
            stored = .earlierShape(100)
            revision = 1
            readInEarlierShape = 1
            known = 1
            knownWasRead = true
            state = CellState(value: 100, stored: .known, throttle: WriteThrottle(interval: interval))
            rewriteAtOpenDue = true
        case 0:
            stored = .value(100)
            revision = 1
            known = 1
            knownWasRead = true
            state = CellState(value: 100, stored: .known, throttle: WriteThrottle(interval: interval))
        case 1:
            // The first read failed (the key could not be read for now): the default, what is stored unknown, and a
            // read again with the backoff.
            stored = .value(100)
            revision = 1
            state = CellState(value: Self.defaultValue, stored: .unknown, throttle: WriteThrottle(interval: interval))
            var effects = JobEffects()
            state.retryUnknownRead(&effects)
            if let delay = effects.checkRetry { schedule(.checkRetry, after: delay) }
        default:
            state = CellState(
                value: Self.defaultValue, stored: .defaultUnsaved, throttle: WriteThrottle(interval: interval))
            if let tick = state.throttle.arm(now: now, force: true) { schedule(.tick(tick.token), after: tick.delay) }
        }
        note("interval \(String(describing: interval)), stored \(String(describing: stored))")
        _ = state.addListener({ _ in }, sendingCurrent: false)
    }

    func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        guard !condition else { return }
        // Told with the events that led to it, when tracing.
        let before = journal.tracing ? "\n  " + journal.trace.suffix(30).joined(separator: "\n  ") + "\n" : ""
        journal.violations.append(message() + before)
    }

    func note(_ text: @autoclosure () -> String) {
        if journal.tracing { journal.trace.append(text()) }
    }

    // MARK: Events

    /// Whether the cell is gone: released with no work, or let go once its work was done.
    var isGone: Bool { released && !orphaned }

    mutating func step() {
        if isGone { return }
        if random.next() % 8 == 0 { return drain() }
        if random.next() % 150 == 0 { return release() }
        if rewriteAtOpenDue && random.next() % 4 == 0 { return rewriteAtOpen() }
        switch random.next() % 16 {
        case 0, 1: set()
        case 2: outsideWrite()
        case 3: now += [1, 1_000_000, 400_000_000, 2_000_000_000][Int(random.next() % 4)]
        case 4, 5: fireTimer()
        case 6, 7, 8, 9: advanceFlight()
        case 10: startFlush()
        case 11: stepFlush()
        case 12: takeBatch()
        case 13: advanceBatch()
        case 14:
            switch random.next() % 8 {
            case 0: join()
            case 1: removeUnknownFields()
            case 2, 3, 4: startUpdate()
            default: startStoreUpdate()
            }
        default: random.next() % 2 == 0 ? commitUpdate() : commitStoreUpdate()
        }
    }

    mutating func set() {
        guard !released else { return }
        var value = nextSet
        nextSet += 1
        note("set \(value)")
        let needsTick: Bool
        let drain: Bool
        switch state.set(&value) {
        case .changed(let tick, let drains):
            check(update == nil && storeUpdate == nil, "a set during an update was not told so")
            (needsTick, drain) = (tick, drains)
        case .updating:
            // Another thread's set during an update: made, and the update then runs again.
            check(update != nil || storeUpdate != nil, "a set with no update running was taken as one during one")
            (needsTick, drain) = state.changeLocally(to: &value)
        }
        if drain { requestDrain() }
        madeChange(nextSet - 1)
        if needsTick, let tick = state.throttle.arm(now: now) { schedule(.tick(tick.token), after: tick.delay) }
    }

    /// The storage that opened the key on a value in an earlier shape marks it to be written back in this shape.
    mutating func rewriteAtOpen() {
        rewriteAtOpenDue = false
        note("rewrite of the value read at open")
        if state.rewriteRead(), let tick = state.throttle.arm(now: now) {
            schedule(.tick(tick.token), after: tick.delay)
        }
    }

    /// A change of this process, `value`, was made: it is now the last writer's, until another program writes.
    mutating func madeChange(_ value: Int) {
        lastSet = value
        setCameLast = true
        discardedSinceLastSet = false
        updateStoredMeanwhile = nil
        lastChangeVersion = state.version
        dropCameLast = false
    }

    /// Another program writes or removes the value; the monitor's event becomes a check.
    mutating func outsideWrite() {
        let id = nextOutside
        let value: Held? =
            switch random.next() % 8 {
            case 0, 1: nil
            case 2: .earlierShape(id)
            case 3: .anotherVersion(id)
            case 4: .secret(id)
            default: .value(id)
            }
        if value != nil { nextOutside -= 1 }
        note("outside \(value.map(String.init(describing:)) ?? "removal")")
        stored = value
        revision += 1
        lastOutside = .some(value)
        updateStoredBeforeDiscard = nil
        setCameLast = false
        schedule(.check, after: 0)
    }

    mutating func requestCheck() {
        note("check requested")
        if let job = state.requestCheck(on: Self.background, now: now) {
            begin(job, on: Self.background, chaining: true)
        }
    }

    mutating func fireTimer() {
        guard let index = timers.indices.min(by: { timers[$0].due < timers[$1].due }) else { return }
        let (due, timer) = timers.remove(at: index)
        now = max(now, due)
        note("timer \(timer)")
        switch timer {
        case .tick(let token):
            let made = state.startTick(token, on: Self.background, now: now, defaultValue: Self.defaultValue)
            if let job = made { begin(job, on: Self.background, chaining: true) }
        case .check:
            requestCheck()
        case .scheduledCheck:
            note("scheduled check")
            if let job = state.requestScheduledCheck(on: Self.background, now: now) {
                begin(job, on: Self.background, chaining: true)
            }
        case .checkRetry:
            state.checkRetryDue()
            requestCheck()
        }
    }

    mutating func begin(_ job: CellJob<Int>, on thread: UInt, chaining: Bool) {
        if let flight {
            journal.violations.append("a job started while another runs: \(job) beside \(flight.job)")
        }
        if batch != nil { journal.violations.append("a job started while the cell's change is in a batch: \(job)") }
        check(state.busyThread == thread, "the cell is not marked busy on the thread of its job")
        flight = Flight(job: job, thread: thread, outcome: nil, chaining: chaining, start: now)
    }

    /// The job in flight calls its backer, or, having called it, ends.
    mutating func advanceFlight() {
        guard var current = flight else { return }
        guard let outcome = current.outcome else {
            current.outcome = perform(current.job)
            note("performed \(current.job) -> \(current.outcome!)")
            flight = current
            return
        }
        flight = nil
        var effects = JobEffects()
        let chains = current.chaining && !outcome.mayChangeValue
        let next = state.finish(
            current.job, outcome, defaultValue: Self.defaultValue, key: "k", now: now, chaining: chains,
            effects: &effects)
        note("finished, next \(String(describing: next))")
        // The backer takes the bytes adopted as the base of later changes, then the cell goes idle.
        if effects.adoptSeen, next == nil { state.becomeIdle(now: now, effects: &effects) }
        if effects.forgetLastRead, knownWasRead { known = -1 }
        apply(effects)
        // A retry due sooner than the least backoff after the failed job started is at once (a job that took as long
        // as the backoff is retried when it ends, which is no loop).
        let retriedAtOnce = effects.tick.map { now &+ $0.delay &- current.start < WriteThrottle.minimumRetryDelay }
        if case .failed = outcome, next == nil {
            immediateRetries = retriedAtOnce == true ? immediateRetries + 1 : 0
        } else if case .read(.failed) = outcome, next == nil {
            immediateRetries = retriedAtOnce == true ? immediateRetries + 1 : 0
        } else {
            immediateRetries = 0
        }
        // A check's read may fail, then the tick's read at once; never more than that before the backoff.
        check(immediateRetries <= 2, "failed jobs were retried at once, in a loop, with no backoff")
        if let next {
            begin(next, on: current.thread, chaining: current.chaining)
        } else if current.thread == Self.flushing, !Self.succeeded(current.job, outcome) {
            flush?.failed = true
        }
        check(next != nil || state.busyThread == 0, "the cell stays busy with no job in flight")
    }

    /// What the cell does after its lock: flushes woken, a tick, a check's retry, a check.
    mutating func apply(_ effects: JobEffects) {
        if effects.errors.contains(where: { $0.code == .changeDiscarded }) { discardedSinceLastSet = true }
        if effects.drainNotifications { requestDrain() }
        if effects.releaseOrphan {
            check(orphaned, "a cell no storage left was let go twice, or without being kept")
            orphaned = false
            letGo += 1
        }
        for waiter in effects.waiters where waiter === flush?.waiter { flush?.waiter = nil }
        if let tick = effects.tick { schedule(.tick(tick.token), after: tick.delay) }
        if let delay = effects.checkRetry { schedule(.checkRetry, after: delay) }
        if effects.scheduleCheck { schedule(.scheduledCheck, after: 0) }
    }

    /// Whether a flush's last job succeeded, as the cell's `run` tells: not a failure, nor a default's save that found
    /// nothing stored and saved nothing.
    private static func succeeded(_ job: CellJob<Int>, _ outcome: JobOutcome<Int>) -> Bool {
        switch outcome {
        case .failed, .read(.failed): return false
        case .read(.absent), .read(.movedAside):
            if case .createDefault = job { return false }
            return true
        default: return true
        }
    }

    /// Another storage of the key joins, with an interval of its own: the shortest holds.
    mutating func join() {
        guard !released else { return }
        let interval: UInt64? = [0, 500_000_000, nil][Int(random.next() % 3)]
        note("a storage joins, interval \(String(describing: interval))")
        if let tick = state.join(interval: interval, now: now) { schedule(.tick(tick.token), after: tick.delay) }
    }

    /// The storage writes its value without the stored object's unknown members (a write with no change of value),
    /// unless the key holds another version's value and nothing is pending.
    mutating func removeUnknownFields() {
        guard !released, flush == nil else { return }
        // The state says whether the removal is made; the writes it starts while it waits drop the fields.
        guard state.dropUnknownFields() else { return }
        note("unknown fields removed")
        // A write of the value, which races with others' writes as a set does; but not a change of the value, which
        // bytes of another version seen since give way to.
        lastSet = state.value
        setCameLast = true
        discardedSinceLastSet = false
        updateStoredMeanwhile = nil
        dropCameLast = true
        startFlush()
    }

    // MARK: Release

    /// The last storage goes: with work left the cell is kept and writes it at once (with the backoff), then let go.
    mutating func release() {
        guard !released, flush == nil, update == nil, storeUpdate == nil else { return }
        // The storage's init ended before it could be released.
        if rewriteAtOpenDue { rewriteAtOpen() }
        released = true
        let (kept, tick) = state.orphan(now: now)
        note("released, kept \(kept)")
        orphaned = kept
        if let tick { schedule(.tick(tick.token), after: tick.delay) }
    }

    // MARK: Notifications

    mutating func requestDrain() {
        drains += 1
        check(drains == 1, "two drains of the cell's notifications at once")
    }

    /// A round of the drain: the listener is given what was queued; another round follows if more came meanwhile.
    mutating func drain() {
        guard drains > 0 else { return }
        drains -= 1
        guard let batch = state.takeNotifications() else { return }
        delivered += batch.values.map(\.value)
        note("delivered \(batch.values.map(\.value))")
        if state.hasNotificationsLeft() { requestDrain() }
    }

    // MARK: Batches and updates

    /// A flush of every cell of a store takes the cell's change into its batch.
    mutating func takeBatch() {
        guard batch == nil else { return }
        let start = withUnsafeTemporaryAllocation(of: Int.self, capacity: 1) { buffer -> (BatchTake<UInt64>, Int?) in
            let slot = buffer.baseAddress!
            // The store writes on condition (as the package's stores do): a rewrite is left to its own conditional write.
            let start = state.startBatchWrite(on: Self.background, now: now, rewritesOnCondition: true, into: slot)
            guard case .taken = start else { return (start, nil) }
            return (start, slot.move())
        }
        guard case .taken(let version) = start.0, let value = start.1 else { return }
        note("batch takes \(value) at \(version)")
        if flight != nil { journal.violations.append("a batch took the change of a cell whose job runs") }
        check(state.busyThread == Self.background, "the cell is not busy with its batch")
        batch = (version, value, nil)
    }

    /// The batch is written (or fails), then the cell takes how it ended.
    mutating func advanceBatch() {
        guard var current = batch else { return }
        guard let failed = current.failed else {
            current.failed = failing && random.next() % 5 == 0
            if current.failed == false { write(current.value) }
            batch = current
            return
        }
        batch = nil
        var effects = JobEffects()
        let failure = failed ? WLStorageError(code: .writeFailed, message: "injected", key: "k") : nil
        _ = state.finishBatchWrite(current.version, failure: failure, now: now, effects: &effects)
        note("batch finished, failed \(failed)")
        apply(effects)
        check(state.busyThread == 0, "the cell stays busy after its batch")
    }

    mutating func startUpdate() {
        guard update == nil, storeUpdate == nil, !released else { return }
        let (start, count) = state.startUpdate(counting: true)
        note("update starts from \(start)")
        update = (start, count)
    }

    /// The update's closure returned a new value: committed if nothing changed the value since it started, else run
    /// again from the value now.
    mutating func commitUpdate() {
        guard let current = update else { return }
        var value = nextSet
        let before = state.value
        guard let (needsTick, drain) = state.commitUpdate(&value, ifUnchangedSince: current.count) else {
            note("update runs again")
            let (start, count) = state.startUpdate(counting: false)
            update = (start, count)
            return
        }
        check(before == current.start, "an update committed over a change made since it started")
        if drain { requestDrain() }
        note("update commits \(nextSet)")
        nextSet += 1
        update = nil
        madeChange(nextSet - 1)
        if needsTick, let tick = state.throttle.arm(now: now) { schedule(.tick(tick.token), after: tick.delay) }
    }

    /// An update in the store starts, its change written first (here: only when none is pending), and reads the key.
    mutating func startStoreUpdate() {
        guard update == nil, storeUpdate == nil, !released, !state.isPending, case .value? = stored else { return }
        _ = state.startUpdate(counting: true)
        storeUpdate = (state.changeCount, revision)
        note("store update reads revision \(revision)")
    }

    /// The update's conditional write: stored only if the key is still the revision read (else read again); then the
    /// cell takes the value unless it changed meanwhile or a newer change of its own is pending.
    mutating func commitStoreUpdate() {
        guard let current = storeUpdate else { return }
        guard revision == current.revision else {
            guard case .value? = stored else {
                // The key holds what this type cannot decode: the update is made in this process, as a set.
                state.endUpdate()
                storeUpdate = nil
                return set()
            }
            // Each try writes the pending change first, then reads the key.
            guard !state.isPending, !state.isBusy else {
                note("store update waits for a flush")
                storeUpdate = (current.count, -1)
                return startFlush()
            }
            note("store update reads revision \(revision)")
            storeUpdate = (state.changeCount, revision)
            return
        }
        let value = nextSet
        nextSet += 1
        stored = .value(value)
        revision += 1
        readInEarlierShape = revision
        var adopted = value
        let (adoption, drain, records) = state.adoptStoredUpdate(
            &adopted, changeCount: current.count, written: Data(), on: Self.updating)
        note("store update stores \(value): \(adoption)")
        if records {
            // The update records its bytes as written, the cell busy meanwhile, then leaves it idle.
            check(state.busyThread == Self.updating, "the cell is not busy while the update records its value")
            var effects = JobEffects()
            state.becomeIdle(now: now, effects: &effects)
            apply(effects)
        }
        if drain { requestDrain() }
        switch adoption {
        case .adopted:
            known = revision
            knownWasRead = false
            madeChange(value)
            // A removal of unknown fields asked for meanwhile is still to write, with this value: no change of it.
            if state.isPending { lastChangeVersion = state.writtenVersion }
        case .changedMeanwhile:
            // The key is read again before the update returns: it then holds the update's value, unless newer.
            madeChange(value)
            schedule(.check, after: 0)
        case .pending:
            // A set made meanwhile is newer, and is written after (unless its write was under way already).
            check(state.isPending, "a store update gave way to a change that is not pending")
            check(
                !dropCameLast || lastChangeVersion > state.writtenVersion,
                "a store update gave way to a removal of unknown fields, which is no change of the value")
            updateStoredMeanwhile = value
            updateStoredBeforeDiscard = value
        }
        state.endUpdate()
        storeUpdate = nil
    }

    // MARK: Flushes

    mutating func startFlush() {
        guard flush == nil, !released else { return }
        note("flush")
        flush = Flush()
        stepFlush()
    }

    /// The flush asks the state again, unless it waits for a job or runs its own.
    mutating func stepFlush() {
        guard var current = flush, current.waiter == nil, flight?.thread != Self.flushing else { return }
        if current.failed {
            note("flush failed")
            flush = nil
            return
        }
        var target = current.target
        let step = state.flushStep(on: Self.flushing, now: now, upTo: &target, waitingForJobs: true)
        current.target = target
        switch step {
        case .done:
            note("flush done")
            check(state.writtenVersion >= target ?? 0, "a flush returned before its changes were written")
            flush = nil
            return
        case .reentrant:
            journal.violations.append("a flush from no job was taken as reentrant")
            flush = nil
            return
        case .wait(let waiter):
            current.waiter = waiter
            flush = current
        case .run(let job):
            flush = current
            begin(job, on: Self.flushing, chaining: false)
        }
    }

    // MARK: The backer

    /// The backer's side of `job`, against the stored value; fails now and then while `failing`.
    mutating func perform(_ job: CellJob<Int>) -> JobOutcome<Int> {
        let fails = failing && random.next() % 5 == 0
        let error = WLStorageError(code: fails ? .writeFailed : .readFailed, message: "injected", key: "k")
        switch job {
        case .write(let value, let version):
            if fails { return .failed(error) }
            if case .anotherVersion? = stored, known == revision {
                check(
                    lastChangeVersion > state.writtenVersion,
                    "another version's bytes, read, were replaced with no change made")
            }
            // A rewrite in the current shape replaces only the version read.
            if state.isRewrite(version) {
                guard known == revision else { return .rewriteRefused }
                check(
                    revision == readInEarlierShape,
                    "a rewrite replaced a value stored after the one it rewrites, which a check had seen")
            }
            write(value)
            return .written
        case .createDefault(let value, _):
            if fails { return .failed(error) }
            guard let found = stored else {
                write(value)
                return .created
            }
            return .read(read(found))
        case .reread:
            if fails { return .read(.failed(error)) }
            guard let found = stored else {
                known = 0
                knownWasRead = false
                return .read(.absent)
            }
            return .read(read(found))
        case .check:
            if fails { return .reported(error) }
            guard let found = stored else {
                let knew = known != 0
                known = 0
                knownWasRead = knew
                return .checked(knew ? .removed : .unchanged)
            }
            let seen = known == revision
            known = revision
            knownWasRead = true
            if seen { return .checked(.unchanged) }
            switch found {
            case .value(let value), .earlierShape(let value):
                return .checked(.changed(value))
            case .anotherVersion:
                return .reported(WLStorageError(code: .storedByAnotherVersion, message: "another version", key: "k"))
            case .secret:
                return .checked(.unreadable(WLStorageError(code: .decodingFailed, message: "sealed", key: "k")))
            }
        }
    }

    /// A first read of `found`, as the backer decodes it.
    private mutating func read(_ found: Held) -> ReadResult<Int> {
        known = revision
        knownWasRead = true
        switch found {
        case .value(let value):
            return .value(value)
        case .earlierShape(let value):
            readInEarlierShape = revision
            return .reshaped(value, rewrite: true, note: nil)
        case .anotherVersion:
            return .anotherVersion(WLStorageError(code: .storedByAnotherVersion, message: "another version", key: "k"))
        case .secret:
            return .failed(WLStorageError(code: .decodingFailed, message: "sealed", key: "k"))
        }
    }

    private mutating func write(_ value: Int) {
        stored = .value(value)
        revision += 1
        readInEarlierShape = revision
        known = revision
        knownWasRead = false
    }

    mutating func schedule(_ timer: Timer, after delay: UInt64) {
        let (due, overflow) = now.addingReportingOverflow(delay)
        timers.append((overflow ? .max : due, timer))
    }

    // MARK: The quiet end

    /// Runs what is left with nothing failing and nothing new: jobs, flushes, then timers in order. Returns whether
    /// all is done (a change pending over another key's secret is retried for ever, and never written).
    mutating func settle() -> Bool {
        failing = false
        note("settling")
        if rewriteAtOpenDue { rewriteAtOpen() }
        for _ in 0..<3_000 {
            if isGone {
                return true
            } else if drains > 0 {
                drain()
            } else if update != nil {
                commitUpdate()
            } else if batch != nil {
                advanceBatch()
            } else if flight != nil {
                advanceFlight()
            } else if flush != nil {
                if flush?.waiter != nil {
                    journal.violations.append("a flush waits with no job in flight to wake it")
                    return true
                }
                stepFlush()
            } else if storeUpdate != nil {
                commitStoreUpdate()
            } else if state.isPending, state.throttle.interval == .max, !released {
                // Without a flush interval, changes are written by a flush.
                startFlush()
            } else if !timers.isEmpty {
                fireTimer()
            } else {
                return true
            }
        }
        return false
    }
}

@Suite(.onTestThreads) struct CellStateModelTests {
    static var seeds: [UInt64] {
        if let seed = ProcessInfo.processInfo.environment["WLSTORAGE_SEED"].flatMap(UInt64.init) { return [seed] }
        // More worlds on request, to explore (the suite runs 1,000 of each length).
        let worlds = ProcessInfo.processInfo.environment["WLSTORAGE_MODEL_WORLDS"].flatMap(UInt64.init) ?? 1_000
        return Array(1...max(worlds, 1))
    }

    @Test(arguments: [60, 400])
    func everyInterleavingConvergesOnTheLastWriterAndEveryFlushWaitsForItsChanges(steps: Int) {
        for seed in Self.seeds {
            let failures = Self.run(seed: seed &* 7_919 &+ UInt64(steps), steps: steps, tracing: false)
            guard !failures.isEmpty else { continue }
            // Run again, telling what happened.
            let told = Self.run(seed: seed &* 7_919 &+ UInt64(steps), steps: steps, tracing: true)
            Issue.record("seed \(seed) (\(steps) steps): \(told)")
            return
        }
    }

    /// What went wrong in the world of `seed`, with its last events when `tracing`.
    static func run(seed: UInt64, steps: Int, tracing: Bool) -> String {
        do {
            var world = CellStateWorld(seed: seed, tracing: tracing)
            for _ in 0..<steps { world.step() }
            let settled = world.settle()
            let state = world.state
            let stored = world.stored.map { $0.value } ?? CellStateWorld.defaultValue
            var failures = Array(world.journal.violations.prefix(3))
            if world.isGone {
                // Released: what it had to write was written before it was let go.
                if world.letGo > 0, state.hasWork { failures.append("a cell was let go with work left") }
            } else if case .secret? = world.stored {
                // Another key's secret is never replaced, not even by a change of this process made after it.
                if case .some(let outside?) = world.lastOutside, outside == world.stored {
                } else {
                    failures.append("another key's secret was written by this process")
                }
            } else if !settled {
                failures.append("the world did not settle")
            } else if state.isPending || state.isBusy {
                failures.append("work left")
            } else if world.setCameLast && !world.discardedSinceLastSet && !world.dropCameLast {
                // This process's change came last: it is the value, and it is stored.
                let winners = [world.lastSet, world.updateStoredMeanwhile]
                if world.stored?.value != state.value || !winners.contains(state.value) {
                    failures.append("the last change, \(world.lastSet!), is not the value stored")
                }
            } else if case .some(let outside?) = world.lastOutside, outside.value == nil {
                // Another version's bytes came last: left as they are, unless a change this process made before them
                // was written after them.
                if world.stored != outside && world.stored != world.lastSet.map({ CellStateWorld.Held.value($0) }) {
                    failures.append("another version's bytes were replaced by what is not a change of this process")
                }
            } else if let stored {
                // A value came last: the cell and the key agree on the last writer's value.
                if state.value != stored || state.stored == .unknown {
                    failures.append("the cell holds \(state.value), the key \(stored)")
                }
                // The value stored at the start stands while no one else wrote, when the changes made before it was
                // read gave way to it.
                let candidates = [
                    world.lastSet, world.updateStoredMeanwhile,
                    world.discardedSinceLastSet ? world.updateStoredBeforeDiscard : nil,
                    world.lastOutside.map { $0?.value ?? CellStateWorld.defaultValue } ?? 100,
                ]
                if world.lastSet != nil || world.lastOutside != nil, !candidates.contains(stored) {
                    failures.append("the key holds \(stored), neither last writer's value")
                }
            }
            if world.orphaned, settled, !state.hasWork {
                failures.append("a released cell that wrote its work was never let go")
            }
            if world.released {
                // No storage is left to listen.
            } else if world.drains == 0, state.extras?.pendingNotifications.isEmpty == false {
                failures.append("notifications queued with no drain to deliver them")
            } else if let last = world.delivered.last, last != state.value {
                failures.append("the listener was last given \(last), not the value")
            }
            guard !failures.isEmpty else { return "" }
            return """
                \(failures.joined(separator: "; ")): value \(state.value), stored \
                \(world.stored.map(String.init(describing:)) ?? "nothing"), pending \(state.isPending), busy \
                \(state.isBusy), \(state.stored)
                \(world.journal.trace.suffix(40).joined(separator: "\n"))
                """
        }
    }
}
