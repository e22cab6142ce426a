import Foundation
import Testing
import WLStorage
import WLStorageEtcd

/// A namespace no other test uses.
func uniqueNamespace(_ name: String = #function) -> String {
    "\(name.prefix(while: { $0 != "(" }))-\(UUID().uuidString)"
}

/// The bytes of `text`.
func bytes(_ text: String) -> Data {
    Data(text.utf8)
}

/// Runs `body`, synchronous and blocking (calls to etcd, polls), on a thread of its own rather than on a thread of the
/// cooperative pool, in the test's own task: its expectations count for the test.
func onItsOwnThread<R: Sendable>(_ body: () throws -> R) async throws -> R {
    // Errors the storages report are recorded, not printed (see ReportedErrors).
    ReportedErrors.install()
    let executor = ThreadExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor) { try body() }
}

/// Whether the caller runs on the thread of ``onItsOwnThread(_:)``.
var isOnATestThreadOfItsOwn: Bool {
    Thread.current.threadDictionary[ThreadExecutor.marker] != nil
}

/// A task executor that runs its jobs on one thread of its own, until stopped.
private final class ThreadExecutor: TaskExecutor, @unchecked Sendable {  // `jobs` and `stopped` under `condition`
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        Thread.detachNewThread { [self] in
            Thread.current.threadDictionary[Self.marker] = true
            run()
        }
    }

    /// What marks the thread of an executor (a thread's name is not reliable: ThreadSanitizer keeps the one it had).
    static let marker = "WLStorageEtcdTests.ThreadExecutor"

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    /// Ends the thread once the jobs enqueued so far have run.
    func stop() {
        condition.withLock {
            stopped = true
            condition.signal()
        }
    }

    private func run() {
        while true {
            let job: UnownedJob? = condition.withLock {
                while jobs.isEmpty && !stopped { condition.wait() }
                return jobs.isEmpty ? nil : jobs.removeFirst()
            }
            guard let job else { return }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Records what a store's feed reports.
final class FeedRecorder: Sendable {
    private final class Log: Sendable {
        let changes = Lock<[WLStorageStoreChange]>([])
    }

    private let log = Log()
    private let subscription = Lock<WLStorageSubscription?>(nil)

    /// Starts observing `store`, and waits until its watch is made (it then reports `.everything`).
    init(_ store: WLStorageEtcdStore) throws {
        let log = self.log
        subscription.withLock { $0 = store.observeChanges { change in log.changes.withLock { $0.append(change) } } }
        try #require(eventually(timeout: 60) { reported.contains(.everything) }, "the watch was not made")
    }

    /// Everything reported so far, in order.
    var reported: [WLStorageStoreChange] { log.changes.withLock { $0 } }

    /// How many times `.everything` was reported.
    var everythingCount: Int { reported.filter { $0 == .everything }.count }

    /// Stops observing.
    func cancel() {
        subscription.withLock { $0 }?.cancel()
    }
}

/// A storage's value, polled until it is `expected` (60 s of patience): a change travels through the feed.
func eventuallyHolds<T: Equatable>(_ storage: WLStorage<T>, _ expected: T, timeout: Double = 60) -> Bool {
    eventually(timeout: timeout) { storage.wrappedValue == expected }
}

/// What etcd holds under `key` of `namespace`, read with the raw API (no store in between): the bytes and the key's
/// `mod_revision`, or `nil` when nothing is stored.
func rawEntry(in server: EtcdServer, namespace: String, key: String) throws -> (value: Data, revision: Int64)? {
    let etcdKey = Data("wlstorage/\(namespace)/\(key)".utf8).base64EncodedString()
    let answer = try server.post(server.endpoint, "v3/kv/range", ["key": etcdKey])
    guard let found = (answer["kvs"] as? [[String: Any]])?.first else { return nil }
    let value = (found["value"] as? String).flatMap { Data(base64Encoded: $0) } ?? Data()
    let revision = (found["mod_revision"] as? String).flatMap { Int64($0) } ?? 0
    return (value, revision)
}

/// The JSON object etcd holds under `key` of `namespace`, read with the raw API; `nil` when there is none.
func rawObject(in server: EtcdServer, namespace: String, key: String) throws -> [String: Any]? {
    guard let entry = try rawEntry(in: server, namespace: namespace, key: key) else { return nil }
    return (try? JSONSerialization.jsonObject(with: entry.value)) as? [String: Any]
}

/// The etcd key of the namespace's removals that a removal of `key` writes, as the store names it:
/// `wlstorage-removals/<namespace>/` and the bucket of the key, FNV-1a (32 bits) of its UTF-8 bytes modulo 64, in two
/// hexadecimal digits.
func removalsKey(namespace: String, of key: String) -> String {
    "wlstorage-removals/\(namespace)/" + String(format: "%02x", removalsBucket(of: key))
}

/// The bucket of the namespace's removals keys that a removal of `key` writes (see ``removalsKey(namespace:of:)``).
func removalsBucket(of key: String) -> UInt32 {
    key.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 } % 64
}
