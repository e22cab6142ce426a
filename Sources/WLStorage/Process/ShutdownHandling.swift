import Dispatch
import Foundation
import Synchronization
import WLStorageCrypto

/// The one place that flushes storages at shutdown: an `atexit` handler, and Dispatch signal sources for SIGTERM,
/// SIGINT and SIGHUP on one serial queue, installed once by the first storage. Sources are never cancelled: libdispatch
/// on Linux installs its handler only with a signal's first source, so a source made again would never fire;
/// ``WLStorageSystem/flushesOnSignals`` is a flag the handler reads.
enum ShutdownHandling {
    static let signals: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    struct State {
        var started = false
        var signalHandlersWanted = true
        var shutdownFlushTimeout: Duration = .seconds(10)
        var sources: [Int32: any DispatchSourceSignal] = [:]
    }

    /// What the flush at exit and on signals keeps, in the ``Runtime``; `started` is `State.started` without the lock.
    final class Parts: Sendable {
        let state = Lock(State())
        let queue = DispatchQueue(label: "WLStorage.shutdown")
        let started = Atomic<Bool>(false)
        /// Whether the flush at exit or on a signal has begun (see ``WLStorageSystem/isFlushingAtExit``).
        let exitFlushStarted = Atomic<Bool>(false)
        let flushQueue = DispatchQueue(label: "WLStorage.flushAll", attributes: .concurrent)
    }

    private static var parts: Parts { Runtime.shared.shutdown }

    /// Called by every storage initializer; works once.
    static func storageCreated() {
        if parts.started.load(ordering: .acquiring) { return }
        // Decided where the start is marked, so a concurrent change of `flushesOnSignals` comes wholly before or after.
        let (firstTime, wantsSignals) = parts.state.withLock { state in
            defer { state.started = true }
            return (!state.started, state.signalHandlersWanted)
        }
        parts.started.store(true, ordering: .releasing)
        guard firstTime else { return }
        // libcrypto first: its atexit handler then runs after the flush's, which may still hash and encrypt.
        _ = OpenSSLLibrary.shared
        atexit {
            ShutdownHandling.flushEverything(within: WLStorageSystem.shutdownFlushTimeout)
            Runtime.shared.feeds.cancelEveryFeed()
        }
        if wantsSignals { installSignalHandlers() }
    }

    /// `duration` in nanoseconds, `Int.max` when it is longer, so that a deadline of any length never wraps around.
    static func nanoseconds(_ duration: Duration) -> Int {
        guard duration > .zero else { return 0 }
        let (seconds, attoseconds) = duration.components
        guard seconds < Int64(Int.max / 1_000_000_000) else { return .max }
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }

    /// Flushes every cell with work left, side by side on the calling thread and a queue so a hanging backer holds up
    /// only its cell, until all are done or `timeout` has passed (then reports what it left). A cell whose job runs on
    /// the calling thread is left to that job. `included` filters cells (tests); such a flush is never the one at exit.
    static func flushEverything(only included: ((any RegisteredCell) -> Bool)? = nil, within timeout: Duration? = nil) {
        if timeout != nil, included == nil { parts.exitFlushStarted.store(true, ordering: .releasing) }
        let deadline = timeout.map { ContinuousClock.now + $0 }
        let caller = UInt(bitPattern: Int(bitPattern: pthread_self()))
        var insideABacker = false
        /// Whether `cell` has work to flush; one whose job runs on the calling thread has none, and is noticed.
        func hasWork(_ cell: any RegisteredCell) -> Bool {
            switch cell.flushState(from: caller) {
            case .idle: return false
            case .busyHere:
                insideABacker = true
                return false
            case .work: return true
            }
        }
        // The cells of one store (not a directory) are grouped, so their changes are written in one batch.
        var groups: [String: [any RegisteredCell]] = [:]
        var single: [FlushItem] = []
        var live = Runtime.shared.registry.liveCells()
        while let cell = live.popLast() {
            if let included, !included(cell) { continue }
            // A store's cell is grouped without its lock: the batch asks the cell when it takes its change.
            guard let store = cell.storeMedium?.identity else {
                if hasWork(cell) { single.append(.cell(cell)) }
                continue
            }
            groups[store, default: []].append(cell)
        }
        // One store's cells and nothing else, with no deadline: the calling thread writes their batch.
        if deadline == nil, single.isEmpty, groups.count == 1, let cells = groups.first?.value, cells.count > 1 {
            FlushItem.flushStore(cells, insideABacker: insideABacker, on: caller)
            return
        }
        // Otherwise idle cells are left out, and a call from inside a backer is noticed.
        var items = groups.values.map { $0.filter(hasWork) }.filter { !$0.isEmpty }.map(FlushItem.store)
        // From inside a backer, wait for no job in flight: its backer may be waiting for the caller.
        let waiting = !insideABacker
        items += single
        groups = [:]
        single = []
        guard items.count > 1 || deadline != nil else {
            items.first?.flush(waiting: waiting, on: caller)
            return
        }
        guard !items.isEmpty else { return }
        // With a deadline, the calling thread only waits: a write it ran could outlast the deadline.
        let helpers = min(items.count, 16) - (deadline == nil ? 1 : 0)
        let round = FlushRound(items, waiting: waiting, deadline: deadline)
        items = []  // the round holds each cell until it is flushed, no longer
        for _ in 0..<helpers {
            parts.flushQueue.async { round.work() }
        }
        guard let deadline else {
            round.work()
            round.done.wait()
            return
        }
        // Helpers that never come (the queue's threads are all busy) leave their items to a thread of its own.
        Thread.detachNewThread { round.work() }
        if !round.waitUntilDone(before: deadline) {
            let left = round.expire()
            WLStorageSystem.report(
                WLStorageError(
                    code: .writeFailed,
                    message: "the flush at exit ran out of time (\(timeout ?? .zero)): \(left.unfinished) of"
                        + " \(left.total) storages or stores (each store's storages in one) were not flushed or not"
                        + " to the end; values not written are lost"))
        }
    }

    static func installSignalHandlers() {
        let registered = DispatchGroup()
        parts.state.withLock { state in
            guard state.signalHandlersWanted else { return }
            for signal in signals where state.sources[signal] == nil && hasDefaultDisposition(signal) {
                // Until registration, the default action stands, so an early signal still ends the program.
                let source = DispatchSource.makeSignalSource(signal: signal, queue: parts.queue)
                source.setEventHandler {
                    guard WLStorageSystem.flushesOnSignals else { return }
                    flushEverything(within: WLStorageSystem.shutdownFlushTimeout)
                    endProgram(by: signal)
                }
                registered.enter()
                source.setRegistrationHandler { registered.leave() }
                source.resume()
                state.sources[signal] = source
            }
        }
        // Returns once the signals are handled, so a signal right after the first storage is flushed.
        _ = registered.wait(timeout: .now() + 5)
    }

    private static func hasDefaultDisposition(_ signal: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signal, nil, &current) == 0 else { return false }
        let handler = unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
        return handler == unsafeBitCast(SIG_DFL, to: Int.self) && current.sa_flags & SA_SIGINFO == 0
    }

    /// Ends the program by `signal`'s default action, unblocking it first (the source's thread blocks every signal).
    private static func endProgram(by signal: Int32) -> Never {
        Glibc.signal(signal, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(signal)
        _exit(128 + signal)
    }
}

/// What a flush of every cell flushes as one piece of work: a cell, or the cells of one store (``flushStore``).
private enum FlushItem: Sendable {
    case cell(any RegisteredCell)
    case store([any RegisteredCell])

    func flush(waiting: Bool, on thread: UInt) {
        switch self {
        case .cell(let cell):
            cell.flush(waitingForJobs: waiting)
        case .store(let cells):
            Self.flushStore(cells, insideABacker: !waiting, on: thread)
        }
    }

    /// Flushes `cells`, all of one store, on `thread`: one batch, then each cell for what the batch did not take.
    static func flushStore(_ cells: [any RegisteredCell], insideABacker: Bool, on thread: UInt) {
        var needsFlush = [Bool](repeating: true, count: cells.count)
        var busyHere = false
        var taken: [(batch: BatchWrite, index: Int)] = []
        taken.reserveCapacity(cells.count)
        for index in cells.indices {
            switch cells[index].takeBatchWrite(on: thread) {
            case .taken(let batch):
                taken.append((batch, index))
            case .idle:
                needsFlush[index] = false
            case .busyHere:
                needsFlush[index] = false
                busyHere = true
            case .elsewhere:
                break
            }
        }
        // In the keys' order: an etcd transaction's fence spans only its keys, and shared rows are locked in one order.
        taken.sort { $0.batch.write.key < $1.batch.write.key }
        var failing = Duration.zero
        if let medium = taken.first.flatMap({ cells[$0.index].storeMedium }) {
            failing = write(taken, of: cells, to: medium, needsFlush: &needsFlush)
        }
        // After a failed batch written whole, cells are not flushed one by one (a timeout each); nor, reported, once the
        // batch on condition and changes on their own failed for over a second in all, as with a store hung or away.
        let waiting = !insideABacker && !busyHere
        for index in cells.indices where needsFlush[index] {
            guard failing <= .seconds(1) else {
                if case .work = cells[index].flushState(from: thread), let key = cells[index].storeKey {
                    cells[index].record(Self.notTried(key), asMisuse: false)
                }
                continue
            }
            let started = ContinuousClock.now
            if cells[index].flush(waitingForJobs: waiting) == .failed { failing += started.duration(to: .now) }
        }
    }
}

extension FlushItem {
    /// Writes the changes `taken` from `cells` to `medium`'s store: those written whole in one batch, then those on
    /// condition in another. One refused, or of unknown outcome (that batch failed: a server restarting, say; how long
    /// it took is returned), goes to its cell's own flush; after the batch written whole fails, the rest stay pending.
    private static func write(
        _ taken: [(batch: BatchWrite, index: Int)], of cells: [any RegisteredCell], to medium: StoreMedium,
        needsFlush: inout [Bool]
    ) -> Duration {
        let whole = taken.filter { $0.batch.condition == .whole }
        let onCondition = taken.filter { $0.batch.condition != .whole }
        var failure: WLStorageError?
        var stored = whole.count  // from the start of `whole + onCondition`, when there is a failure
        var (written, failing, sent): ([Bool?], Duration?, Int) = ([], nil, .max)  // sent: those after, known unsent
        do {
            if !whole.isEmpty { try medium.store.write(whole.map(\.batch.write)) }
        } catch {
            let message = "\(medium.identity) could not store a batch of \(whole.count) values: \(error)"
            failure = WLStorageError(code: .writeFailed, message: message, underlying: error)
            // The writes a failed batch says it stored, from its start, are written; the others stay pending.
            stored = min(max((error as? WLStorageError)?.storedWrites ?? 0, 0), whole.count)
        }
        if failure == nil, !onCondition.isEmpty, let conditional = medium.capabilities.conditional {
            let started = ContinuousClock.now
            let expected = onCondition.map { taken -> Data? in
                if case .ifItHolds(let bytes) = taken.batch.condition { bytes } else { nil }
            }
            do {
                written = try conditional.write(onCondition.map(\.batch.write), ifTheyHold: expected).map { $0 }
            } catch {
                let known = error as? WLStorageError
                (failing, sent) = (started.duration(to: .now), known?.storedWrites ?? .max)
                written = known?.storedAnswers ?? []
            }
        }
        for (position, (batch, index)) in (whole + onCondition).enumerated() {
            if let failure, position >= stored {
                var error = failure
                error.key = batch.write.key
                _ = cells[index].finishBatchWrite(batch.version, data: batch.write.data, failure: error)
                needsFlush[index] = false
            } else if position < whole.count || written.dropFirst(position - whole.count).first == .some(true) {
                needsFlush[index] = cells[index].finishBatchWrite(batch.version, data: batch.write.data, failure: nil)
            } else {
                let answer = position - whole.count
                let unknown = failing != nil && (answer < written.count ? written[answer] == nil : answer < sent)
                cells[index].giveBackBatchWrite(unsure: unknown ? batch : nil)  // answered: refused
            }
        }
        return failing ?? .zero
    }

    /// Why a flush of every storage left the change of `key` pending: writes of the store failed slowly just before.
    fileprivate static func notTried(_ key: CellKey) -> WLStorageError {
        WLStorageError(
            code: .writeFailed,
            message: "this flush did not write the value: writes to \(key.store ?? "its store") failed for more than a"
                + " second just before, as when the store is away; the change stays pending",
            key: key.key)
    }
}

/// One ``WLStorageSystem/flushAll()``, its items taken one at a time by every thread; a cell is held until flushed.
private final class FlushRound: Sendable {
    private let items: Lock<[FlushItem?]>
    private let count: Int
    private let next = Atomic<Int>(0)
    private let finished = Atomic<Int>(0)
    let done = DispatchSemaphore(value: 0)
    private let waiting: Bool
    private let deadline: ContinuousClock.Instant?
    private let expired = Atomic<Bool>(false)

    init(_ items: [FlushItem], waiting: Bool, deadline: ContinuousClock.Instant?) {
        self.items = Lock(items)
        self.count = items.count
        self.waiting = waiting
        self.deadline = deadline
    }

    /// Flushes cells until none is left to take, or the deadline has passed.
    func work() {
        while true {
            if expired.load(ordering: .relaxed) { return }
            if let deadline, ContinuousClock.now >= deadline { return }
            let index = next.add(1, ordering: .relaxed).oldValue
            guard index < count else { return }
            let item = items.withLock { $0[index].take() }
            item?.flush(waiting: waiting, on: UInt(bitPattern: Int(bitPattern: pthread_self())))
            if finished.add(1, ordering: .acquiringAndReleasing).newValue == count { done.signal() }
        }
    }

    /// Waits until every item is flushed, or `deadline`; returns whether every item was.
    func waitUntilDone(before deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return finished.load(ordering: .acquiring) == count }
            let wait = ShutdownHandling.nanoseconds(remaining)
            if done.wait(timeout: .now() + .nanoseconds(max(wait, 1))) == .success { return true }
        }
    }

    /// Stops every thread from taking another item; returns how many of all were not flushed to their end.
    func expire() -> (unfinished: Int, total: Int) {
        expired.store(true, ordering: .relaxed)
        return (count - finished.load(ordering: .acquiring), count)
    }
}
