import Foundation
import Synchronization
import WLStorage

/// A watch of a store's keys: one `POST /v3/watch` whose answer streams a JSON object per line, read with libcurl as it
/// comes, made again whenever it ends.
///
/// A thread of its own makes the watch, waits for its end, and probes its endpoint every few seconds with a
/// linearizable read of one key (a member that lost its leader, or a connection that died without a word, ends no
/// stream by itself). Each watch's answer is read on a thread of its own, and the changes are reported on a serial
/// queue, one at a time. (Foundation's `URLSession` on Linux, which read it before, could end the process when a watch
/// was cancelled as its connection broke: "Trying to access a behaviour for a task that in not in the registry".)
///
/// The watch remembers the last revision whose events it reported. A watch that ends is made again from the revision
/// after it, which etcd replays: a change made while the watch was away is reported when it is back. It reports
/// ``WLStorageStoreChange/everything`` when it starts anew instead: the first time, once etcd says the revision it
/// resumes from was compacted, or when the cluster is another one (its ID changed, or its revision went back).
final class EtcdWatcher: @unchecked Sendable {  // mutable state under `condition`
    private let client: EtcdClient
    private let prefix: Data
    private let prefixEnd: Data
    private let keyOf: @Sendable (Data) -> String?
    private let changed: @Sendable (WLStorageFeedEvent) -> Void
    private let health: EtcdFeedHealth
    /// Where the changes are reported, one at a time.
    private let queue = DispatchQueue(label: "WLStorageEtcd watch")
    /// How often the endpoint of a running watch is probed.
    private let probeInterval: Duration

    /// One watch's answer being read: stopped by ``cancel()``, which its transfer notices within a second.
    final class Stream: Sendable {
        private let stopped = Atomic<Bool>(false)
        var isCancelled: Bool { stopped.load(ordering: .relaxed) }
        func cancel() { stopped.store(true, ordering: .relaxed) }
    }

    private let condition = NSCondition()
    private var cancelled = false
    /// The watch running, and what is known of it.
    private var task: Stream?
    private var taskEnded = true
    /// Why the last task ended, when it ended with an error.
    private var endError: String?
    private var created = false
    private var resumedFrom: Int64?
    private var buffer = Data()
    /// The revision up to which every event was reported; `nil` before the first watch, or when it starts anew.
    private var lastRevision: Int64?
    private var clusterID: String?

    init(
        client: EtcdClient, prefix: Data, prefixEnd: Data,
        key: @escaping @Sendable (Data) -> String?, health: EtcdFeedHealth,
        changed: @escaping @Sendable (WLStorageFeedEvent) -> Void
    ) {
        self.client = client
        self.prefix = prefix
        self.prefixEnd = prefixEnd
        self.keyOf = key
        self.changed = changed
        self.health = health
        self.probeInterval = min(.seconds(5), client.timeout)
    }

    /// Starts the watch's thread.
    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "WLStorageEtcd watch"
        thread.start()
    }

    /// Stops the watch. Changes already being reported may still be.
    func cancel() {
        let task = condition.withLock {
            cancelled = true
            condition.broadcast()
            return self.task
        }
        task?.cancel()
        // A feed no storage follows has no trouble to tell of.
        health.noteWatching()
    }

    // MARK: - The watch's thread

    private func run() {
        var index = client.preferredIndex
        var backoff = Duration.milliseconds(50)
        while true {
            let endpoint = client.endpoints[index]
            guard let task = makeTask(endpoint) else { return }
            let started = ContinuousClock.now
            var nextProbe = started + probeInterval
            var answered = true
            while true {
                let (ended, stopped) = condition.withLock {
                    while !taskEnded && !cancelled && ContinuousClock.now < nextProbe {
                        _ = condition.wait(until: Date(timeIntervalSinceNow: (nextProbe - ContinuousClock.now).seconds))
                    }
                    return (taskEnded, cancelled)
                }
                if stopped {
                    task.cancel()
                    return
                }
                if ended { break }
                if let failure = probe(endpoint) {
                    answered = false
                    noteTrouble(
                        "stopped answering at \(EtcdClient.describe(endpoint)) (\(failure)); the watch is made again"
                            + (client.endpoints.count > 1 ? " on the next endpoint" : ""))
                    task.cancel()
                    condition.withLock {
                        let giveUp = ContinuousClock.now + .seconds(5)
                        while !taskEnded && !cancelled && ContinuousClock.now < giveUp {
                            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.1))
                        }
                        // A task that says nothing of its end is left to end by itself.
                        taskEnded = true
                        self.task = nil
                    }
                    break
                }
                nextProbe = ContinuousClock.now + probeInterval
            }
            let (worked, whyEnded) = condition.withLock { (answered && created, endError) }
            if answered && !worked {
                noteTrouble(
                    "could not watch at \(EtcdClient.describe(endpoint))"
                        + (whyEnded.map { " (\($0))" } ?? " (the watch ended before etcd made it)"))
            }
            if worked && ContinuousClock.now - started >= .seconds(1) {
                // It ended after it worked a while: made again at once, on the same endpoint.
                backoff = .milliseconds(50)
                continue
            }
            // It could not be made, its endpoint stopped answering, or it ended at once: the next endpoint, after a
            // pause that doubles each time, up to two seconds.
            if !worked { index = (index + 1) % client.endpoints.count }
            let stopped = condition.withLock {
                let until = ContinuousClock.now + backoff
                while !cancelled && ContinuousClock.now < until {
                    _ = condition.wait(until: Date(timeIntervalSinceNow: (until - ContinuousClock.now).seconds))
                }
                return cancelled
            }
            if stopped { return }
            backoff = min(backoff * 2, .seconds(2))
        }
    }

    /// Tells the store's health of a trouble, unless the watch was cancelled meanwhile.
    private func noteTrouble(_ what: String) {
        guard !condition.withLock({ cancelled }) else { return }
        health.noteTrouble(what)
    }

    /// A watch of the store's keys on `endpoint`, from the revision after the last one reported (or from now), started
    /// on a thread of its own; `nil` once cancelled.
    private func makeTask(_ endpoint: URL) -> Stream? {
        let made: (Stream, Data)? = condition.withLock {
            guard !cancelled else { return nil }
            let start = lastRevision.map { $0 + 1 }
            let body = WatchCreateRequest(
                createRequest: .init(key: prefix, rangeEnd: prefixEnd, startRevision: start.map { String($0) }))
            let task = Stream()
            self.task = task
            taskEnded = false
            endError = nil
            created = false
            resumedFrom = start
            buffer = Data()
            return (task, (try? JSONEncoder.etcd.encode(body)) ?? Data())
        }
        guard let (task, body) = made else { return nil }
        let url = endpoint.appendingPathComponent("v3/watch").absoluteString
        let connecting = max(1, Int(probeInterval.seconds * 1000))
        let thread = Thread { [self] in
            // A watch's answer has no end: the probes, not a timeout, tell when it is dead.
            let ended = CurlPost.stream(
                url, body: body, connectMilliseconds: connecting,
                chunk: { [self] data in received(data, of: task) }, stopped: { task.isCancelled })
            condition.withLock {
                guard task === self.task else { return }
                endError = ended
                taskEnded = true
                self.task = nil
                condition.broadcast()
            }
        }
        thread.name = "WLStorageEtcd watch answer"
        thread.start()
        return task
    }

    /// Why `endpoint` did not answer a linearizable read of one key within the probe's time, or `nil` when it did.
    private func probe(_ endpoint: URL) -> String? {
        guard let body = try? JSONEncoder.etcd.encode(RangeRequest(key: prefix, keysOnly: true)) else { return nil }
        do {
            _ = try client.send(body, to: endpoint, path: "v3/kv/range", until: ContinuousClock.now + probeInterval)
            return nil
        } catch {
            return error.description
        }
    }

    // MARK: - The answer (on the watch's answer thread)

    /// Reads the lines `data` completes; returns whether the watch goes on.
    private func received(_ data: Data, of dataTask: Stream) -> Bool {
        let lines: [Data]? = condition.withLock {
            guard dataTask === task, !cancelled, !dataTask.isCancelled else { return nil }
            // A chunk with nothing held before it (etcd sends a response a chunk, its line's end last) is split where it
            // is: its lines are slices of it, not copies. Its bytes are searched through a buffer: `Data`'s own
            // search took about 6 µs for a put's line, this about 0.3 µs.
            var pending = data
            if !buffer.isEmpty {
                buffer.append(data)
                pending = buffer
                buffer = Data()
            }
            let base = pending.startIndex
            var lines: [Data] = []
            var start = base
            for end in Self.lineEnds(in: pending) {
                lines.append(pending[start..<(base + end)])
                start = base + end + 1
            }
            if start < pending.endIndex { buffer = start == base ? pending : Data(pending[start...]) }
            return lines
        }
        guard let lines else { return false }
        for line in lines where !handle(line, of: dataTask) {
            // A watch that cannot go on (compacted, cancelled by the server, another cluster) is made again.
            dataTask.cancel()
            return false
        }
        return true
    }

    /// The offsets in `data` of its line ends.
    private static func lineEnds(in data: Data) -> [Int] {
        data.withUnsafeBytes { bytes in
            var ends: [Int] = []
            for index in bytes.indices where bytes[index] == UInt8(ascii: "\n") { ends.append(index) }
            return ends
        }
    }

    /// Reports what one line of the watch's answer says; returns whether the watch may go on.
    private func handle(_ line: Data, of dataTask: Stream) -> Bool {
        guard line.contains(where: { $0 > 0x20 }) else { return true }
        guard let parsed = try? JSONDecoder.etcd.decode(WatchLine.self, from: line), parsed.error == nil else {
            return false
        }
        guard let result = parsed.result else { return true }
        var reports: [WLStorageFeedEvent] = []
        var made = false
        let goesOn: Bool = condition.withLock {
            guard dataTask === task, !cancelled else { return false }
            if result.created == true {
                // Made: the member answers, whatever the watch finds next.
                created = true
                made = true
            }
            if let id = result.header?.clusterId {
                if let known = clusterID, known != id {
                    // Another cluster: nothing of what was seen holds.
                    clusterID = id
                    lastRevision = nil
                    return false
                }
                clusterID = id
            }
            if let compacted = result.compactRevision.flatMap({ Int64($0) }), compacted > 0 {
                // The revision to resume from is gone: the watch starts anew, and every key is read again.
                lastRevision = nil
                return false
            }
            if result.canceled == true { return false }
            if result.created == true {
                let revision = result.header?.revisionNumber ?? 0
                if let resumedFrom {
                    // A cluster whose revision went back (restored from a backup) replays nothing of what it lost.
                    if revision < resumedFrom - 1 {
                        lastRevision = nil
                        return false
                    }
                } else {
                    lastRevision = revision
                    reports.append(.change(.everything))
                }
            }
            for event in result.events ?? [] {
                guard let kv = event.kv else { continue }
                if let revision = kv.modRevision.flatMap({ Int64($0) }) {
                    lastRevision = max(lastRevision ?? 0, revision)
                }
                guard let key = keyOf(kv.key) else { continue }
                // A put carries the key's version and bytes; a removal, or a put without a version, is read.
                if event.type != "DELETE", let version = kv.version.flatMap({ Int64($0) }) {
                    reports.append(
                        .carried(WLStorageCarriedChange(key: key, version: version, data: kv.value ?? Data())))
                } else {
                    reports.append(.change(.key(key)))
                }
            }
            return true
        }
        if made { health.noteWatching() }
        // One watch's answers at a time, in order, whichever thread read them.
        if !reports.isEmpty { queue.sync { for report in reports { changed(report) } } }
        return goesOn
    }
}
