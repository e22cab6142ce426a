import Foundation
import WLStorage

/// The change feed of a store: a connection of its own that runs `LISTEN` on the store's channel, read by a thread that
/// waits on its socket (``SocketWatch``). It connects with the first handler and disconnects with the last; once it
/// listens, and after every reconnection, it reports ``WLStorageStoreChange/everything``. A listening connection is
/// probed every ``probeInterval`` (a middlebox can leave the socket open and silent); failures to listen are reported
/// at first, then once a minute.
///
/// Locks: `state` guards the handlers, never held while a handler runs or the connection is used. Everything else is
/// used on `queue` only: the watch's thread reads the socket inside `queue.sync`.
final class PostgresListener: @unchecked Sendable {  // `state` under its lock; the rest on `queue`
    typealias Handler = @Sendable (WLStorageFeedEvent) -> Void

    private struct State {
        var handlers: [UInt64: Handler] = [:]
        var nextID: UInt64 = 0
        /// Changes with each start and stop, so that a retry scheduled for an earlier run does nothing.
        var generation: UInt64 = 0
        /// Why the listener does not listen, while it tries to.
        var trouble: WLStorageError?
    }

    /// How often a listening connection is probed.
    package static let probeInterval: Duration = .seconds(2)
    /// How long a probe may take before the connection counts as lost: bounded by the store's timeout too.
    package static let probeTimeout: Duration = .seconds(5)
    /// How often a listener that still cannot listen says so again.
    private static let reportInterval: Duration = .seconds(60)

    /// When the listener last reported that it cannot listen; `nil` while it listens.
    private var lastTrouble: ContinuousClock.Instant?
    /// The server's timeline where the listener last listened (a promoted standby starts a new one).
    private var timeline: UInt32?
    private var probe: (any DispatchSourceTimer)?
    private let identity: String

    private let state = Locked(State())
    private let queue: DispatchQueue
    private let connection: PostgresConnection
    private var watch: SocketWatch?
    private let channel: String
    /// The store's table, quoted, and its OID as this connection found it (a table made again has another).
    private let table: String
    private var tableOID: String?
    private let namespace: String
    private let timeout: Duration
    /// The server process of the store's own writing connection, whose notifications are not changes.
    private let ownPID: @Sendable () -> Int32?
    /// Whether carried bytes are taken from any sender (the store's `adoptsNotifiedValues`).
    private let trustsEveryRole: Bool
    /// Each sender process's role and whether it may update the table, checked at each probe.
    private var senders: [Int32: (role: String, trusted: Bool)] = [:]

    init(
        settings: PostgresSettings, channel: String, table: String, namespace: String, timeout: Duration,
        identity: String, trustsEveryRole: Bool, ownPID: @escaping @Sendable () -> Int32?
    ) {
        self.trustsEveryRole = trustsEveryRole
        self.connection = PostgresConnection(settings: settings)
        self.channel = channel
        self.table = table
        self.namespace = namespace
        self.timeout = timeout
        self.identity = identity
        self.ownPID = ownPID
        self.queue = DispatchQueue(label: "WLStoragePostgres.listener")
    }

    /// Adds a handler; the first one starts listening. Returns the handler's number for ``remove(_:)``.
    func add(_ handler: @escaping Handler) -> UInt64 {
        let (id, start) = state.withLock { state -> (UInt64, UInt64?) in
            state.nextID += 1
            state.handlers[state.nextID] = handler
            guard state.handlers.count == 1 else { return (state.nextID, nil) }
            state.generation += 1
            return (state.nextID, state.generation)
        }
        if let start { queue.async { self.connect(generation: start, attempt: 0) } }
        return id
    }

    /// Removes a handler; the last one stops listening.
    func remove(_ id: UInt64) {
        let (removed, stop) = state.withLock { state -> (Handler?, Bool) in
            let removed = state.handlers.removeValue(forKey: id)
            guard state.handlers.isEmpty, removed != nil else { return (removed, false) }
            state.generation += 1
            return (removed, true)
        }
        _ = removed  // released here, outside the lock
        guard stop else { return }
        // At exit, a connection attempt in flight ends first: the libraries it calls are torn down next. Bounded, as
        // the last handler may be removed on this queue.
        let stopped = WLStorageSystem.isFlushingAtExit ? DispatchSemaphore(value: 0) : nil
        queue.async {
            self.stopListening()
            stopped?.signal()
        }
        _ = stopped?.wait(timeout: .now() + .seconds(2))
    }

    // MARK: - On the queue

    private func connect(generation: UInt64, attempt: Int) {
        guard isCurrent(generation) else { return }
        // A connection left from an earlier run (stopped and started again before its stop ran) is replaced.
        closeConnection()
        do {
            try connection.connect(deadline: .now + timeout)
            noticeFailover()
            _ = try connection.query(#"LISTEN "\#(channel)""#, deadline: .now + timeout)
            guard let socket = connection.socket else { throw PostgresError(.connectionLost, "no socket") }
            // A thread reads the socket when it is readable, on `queue` (see ``SocketWatch``).
            watch = try SocketWatch(socket: socket) { [weak self, queue] watch in
                queue.sync {
                    // A watch replaced or cancelled meanwhile reads nothing: its thread ends.
                    guard let self, self.watch === watch else { return }
                    self.readable(generation: generation)
                }
            }
        } catch {
            closeConnection()
            reportTrouble("cannot listen: \(error)")
            retry(generation: generation, attempt: attempt + 1)
            return
        }
        let listening = state.withLock { state -> Bool in
            guard state.generation == generation else { return false }
            state.trouble = nil
            return true
        }
        guard listening else { return stopListening() }
        lastTrouble = nil
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let interval = DispatchTimeInterval.nanoseconds(Int(Self.probeInterval / .nanoseconds(1)))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.probeConnection(generation: generation) }
        probe = timer
        timer.resume()
        deliver([.change(.everything)])
    }

    /// Reports a failover: the server is on another timeline than before (later: a promoted standby; earlier: an old
    /// primary restarted as primary, or a restored backup). The WAL file's name starts with the timeline; a server that
    /// cannot be asked is not judged.
    private func noticeFailover() {
        let rows = try? connection.query(
            "SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)", deadline: .now + timeout)
        guard let text = rows?.first?.first.flatMap({ $0 }),
            let current = UInt32(String(decoding: text, as: UTF8.self), radix: 16)
        else { return }
        defer { timeline = current }
        guard let timeline, current != timeline else { return }
        let message =
            current > timeline
            ? "the server of \(identity) is a promoted standby now (its history went from timeline \(timeline) to"
                + " \(current)): writes the old server acknowledged and had not sent to it are not there (with"
                + " asynchronous replication); every storage of the store reads its keys again"
            : "the server of \(identity) is now one on an earlier timeline of PostgreSQL's history (\(current)) than"
                + " the server before (\(timeline)): an old primary started again as a primary after its standby was"
                + " promoted (two servers take writes), or a server restored from a backup; writes made on the later"
                + " timeline are not there; every storage of the store reads its keys again"
        WLStorageSystem.report(WLStorageError(code: .storeFailedOver, message: message))
    }

    /// One probe: a round trip answered within the probe's timeout; notifications meanwhile are delivered.
    private func probeConnection(generation: UInt64) {
        guard isCurrent(generation), watch != nil else { return }
        do {
            try checkSenders(deadline: .now + min(timeout, Self.probeTimeout))
        } catch {
            reportTrouble("stopped answering (\(error)); it reconnects, and the storages read their keys again")
            closeConnection()
            retry(generation: generation, attempt: 0)
            return
        }
        readable(generation: generation)
    }

    /// Why the listener does not listen while it tries to; `nil` while it listens, or has no handler.
    var trouble: WLStorageError? { state.withLock { $0.trouble } }

    /// Says that the feed cannot hear changes: at the first trouble, then once a minute while it lasts.
    private func reportTrouble(_ what: String) {
        let error = WLStorageError(
            code: .readFailed,
            message: "the change feed of \(identity) \(what); until it listens again, this program does not see the"
                + " changes other programs make")
        var replaced: WLStorageError? = error  // the error replaced is released outside the lock
        state.withLock { swap(&$0.trouble, &replaced) }
        let now = ContinuousClock.now
        if let lastTrouble, now - lastTrouble < Self.reportInterval { return }
        lastTrouble = now
        WLStorageSystem.report(error)
    }

    private func closeConnection() {
        tableOID = nil
        senders = [:]
        probe.take()?.cancel()
        watch.take()?.cancel()
        connection.disconnect()
    }

    private func readable(generation: UInt64) {
        do {
            var received = try othersNotifications()
            // The table's OID, which carried changes name, is looked up once per connection (the table may not exist
            // at the start). Notifications read with its answer are taken here: no socket event announces them.
            if tableOID == nil, !received.isEmpty {
                tableOID =
                    try connection.query(
                        "SELECT to_regclass($1)::oid::text", [.text(table)], deadline: .now + timeout
                    ).first?.first.flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
                received += try othersNotifications()
            }
            while !received.isEmpty {
                let parsed = received.compactMap { notification in
                    WLStoragePostgresStore.change(
                        fromPayload: notification.payload, namespace: namespace, table: tableOID
                    ).map { (notification.pid, $0) }
                }
                let (trusted, asked) = try trustedSenders(of: parsed)
                var changes: [WLStorageFeedEvent] = []
                for (pid, var change) in parsed {
                    // Bytes from a sender not trusted are not taken: the key it names is read.
                    if case .carried(let carried) = change, !trusted.contains(pid) {
                        change = .change(.key(carried.key))
                    }
                    // Changes to read are reported once each; carried ones each, in order.
                    if case .change = change, changes.contains(change) { continue }
                    changes.append(change)
                }
                if !changes.isEmpty { deliver(changes) }
                // Those that came with the answer of a look-up of senders, which no event of the socket announces.
                received = asked ? try othersNotifications() : []
            }
        } catch {
            closeConnection()
            retry(generation: generation, attempt: 0)
        }
    }

    // MARK: Trusted senders

    /// The senders of `changes` whose carried bytes are taken (all when the store trusts every role, else those whose
    /// role may update the table), and whether the server was asked. A role is learnt once per process; a number
    /// reused by another process is caught by the check at each probe (numbers wrap far more slowly than that).
    private func trustedSenders(of changes: [(Int32, WLStorageFeedEvent)]) throws(PostgresError) -> (
        trusted: Set<Int32>, asked: Bool
    ) {
        var carriedBy = Set<Int32>()
        for case (let pid, .carried) in changes { carriedBy.insert(pid) }
        if trustsEveryRole { return (carriedBy, false) }
        let unknown = carriedBy.filter { senders[$0] == nil }
        let asked = !unknown.isEmpty && tableOID != nil
        if asked, let tableOID {
            senders.merge(try lookUp(unknown, tableOID: tableOID, deadline: .now + timeout)) { _, found in found }
        }
        return (carriedBy.filter { senders[$0]?.trusted ?? false }, asked)
    }

    /// The role of each of `pids`'s running processes, and whether it may write every row of the table `tableOID`: it
    /// may update the table and no row security policy applies to it (none enabled, or the role bypasses them). A role
    /// kept to some rows could have written no other namespace's, and is trusted with none.
    private func lookUp(
        _ pids: some Sequence<Int32>, tableOID: String, deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> [Int32: (role: String, trusted: Bool)] {
        let rows = try connection.query(
            "SELECT a.pid::text, a.usesysid::text, (has_table_privilege(a.usesysid, c.oid, 'UPDATE')"
                + " AND (NOT c.relrowsecurity OR r.rolsuper OR r.rolbypassrls"
                + " OR (c.relowner = a.usesysid AND NOT c.relforcerowsecurity)))::text"
                + " FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid JOIN pg_class c ON c.oid = $1::oid"
                + " WHERE a.pid = ANY($2::int[])",
            [.text(tableOID), .text("{" + pids.map(String.init).joined(separator: ",") + "}")], deadline: deadline)
        var found: [Int32: (role: String, trusted: Bool)] = [:]
        for row in rows {
            guard row.count == 3, let pid = row[0].flatMap({ Int32(String(decoding: $0, as: UTF8.self)) }),
                let role = row[1].map({ String(decoding: $0, as: UTF8.self) })
            else { continue }
            found[pid] = (role, row[2].map { String(decoding: $0, as: UTF8.self) } == "true")
        }
        return found
    }

    /// Forgets the senders whose process ended, whose number another role now has, or whose trust changed; they are
    /// looked up again when they next send. Always one round trip (`SELECT 1` with no sender known).
    private func checkSenders(deadline: ContinuousClock.Instant) throws(PostgresError) {
        guard let tableOID, !senders.isEmpty else {
            senders = [:]
            _ = try connection.query("SELECT 1", deadline: deadline)
            return
        }
        let found = try lookUp(senders.keys, tableOID: tableOID, deadline: deadline)
        senders = senders.filter { pid, sender in
            found[pid].map { $0.role == sender.role && $0.trusted == sender.trusted } ?? false
        }
    }

    /// The notifications on the store's channel received now, but the writing connection's own, its process read after
    /// they are in (it wrote before they were heard); what a process it had before a reconnection sent is reported.
    private func othersNotifications() throws(PostgresError) -> [PostgresConnection.Notification] {
        let received = try connection.notifications()
        let own = ownPID()
        return received.filter { $0.channel == channel && $0.pid != own }
    }

    private func retry(generation: UInt64, attempt: Int) {
        guard isCurrent(generation) else { return }
        let delay = min(0.1 * pow(2, Double(min(attempt, 10))), 5)
        queue.asyncAfter(deadline: .now() + delay) { [weak self] in
            self?.connect(generation: generation, attempt: attempt)
        }
    }

    private func stopListening() {
        guard state.withLock({ $0.handlers.isEmpty }) else { return }
        closeConnection()
        lastTrouble = nil
        _ = state.withLock { $0.trouble.take() }  // released outside the lock
    }

    private func isCurrent(_ generation: UInt64) -> Bool { state.withLock { $0.generation == generation } }

    /// Calls every handler with each change, outside the lock; a handler removed meanwhile is not called again.
    private func deliver(_ changes: [WLStorageFeedEvent]) {
        let ids = state.withLock { Array($0.handlers.keys) }
        for change in changes {
            for id in ids {
                state.withLock { $0.handlers[id] }?(change)
            }
        }
    }

    deinit {
        probe?.cancel()
        watch?.cancel()
    }
}
