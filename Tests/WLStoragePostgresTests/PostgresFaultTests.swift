import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// Hostile uses of the store: connections killed from outside, a table dropped under it, a server that never answers,
/// notifications it did not send, and calls from many threads while the server crashes.
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresFaultTests {
    // MARK: - Helpers

    /// A connection of the test's own, to run SQL as another program would.
    private static func admin(_ url: String) throws -> PostgresConnection {
        let connection = PostgresConnection(settings: try PostgresSettings(url: url, timeout: .seconds(10)))
        try connection.connect(deadline: .now + .seconds(10))
        return connection
    }

    @discardableResult
    private static func sql(_ connection: PostgresConnection, _ text: String) throws -> [[Data?]] {
        try connection.query(text, deadline: .now + .seconds(10))
    }

    /// Terminates the server processes of `application` whose last statement matches `condition`; returns how many.
    private static func terminate(
        _ connection: PostgresConnection, application: String, where condition: String
    ) throws -> Int {
        let rows = try sql(
            connection,
            """
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(application)' \
            AND pid <> pg_backend_pid() AND \(condition)
            """)
        return rows.count
    }

    /// Runs `body` on a thread of its own; returns whether it ended within `seconds`.
    private static func completes(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            body()
            done.signal()
        }
        return done.wait(timeout: .now() + seconds) == .success
    }

    /// Counts calls, safely from any thread.
    private final class Counter: Sendable {
        let value = Shared(0)
        func increment() { value.withLock { $0 += 1 } }
        var count: Int { value.withLock { $0 } }
    }

    /// Holds an observation, so that its own handler can cancel it.
    private final class ObservationBox: Sendable {
        let observation = Shared<WLStorageSubscription?>(nil)
    }

    // MARK: - Notifications the store did not send

    /// A payload announcing a namespace of length `Int.max` makes `colon + 1 + length` overflow: anyone who may
    /// `NOTIFY` on the channel crashes every program listening on it.
    @Test func aPayloadWithAnEnormousLengthIsIgnoredNotACrash() async {
        await #expect(processExitsWith: .success) {
            _ = WLStoragePostgresStore.change(fromPayload: "k:9223372036854775807:x", namespace: "x", table: "1")
            _ = WLStoragePostgresStore.change(fromPayload: "*:9223372036854775806:x", namespace: "x", table: "1")
        }
    }

    @Test func garbageNotificationsAreIgnoredAndTheListenerKeepsListening() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))  // creates the table
        let feed = try FeedRecorder(store)
        feed.clear()
        let admin = try Self.admin(cluster.url)
        for payload in [
            "garbage", "", "k:", "k:abc:", "k:-1:x", "k:99999:\(namespace)", "*:", "k::", "k:3:ab",
            "*:\(namespace.utf8.count + 1):\(namespace)", "k:\(namespace.utf8.count):\(namespace.dropLast())",
        ] {
            let quoted = payload.replacingOccurrences(of: "'", with: "''")
            try Self.sql(admin, "NOTIFY wlstorage_changes, '\(quoted)'")
        }
        try Self.sql(admin, "NOTIFY wlstorage_changes, 'k:\(namespace.utf8.count):\(namespace)by-hand'")
        #expect(feed.waitFor(.key("by-hand")))
        try other.write(key: "after", data: bytes("1"))
        #expect(feed.waitFor(.key("after")))
        #expect(feed.reported == [.key("by-hand"), .key("after")])
    }

    // MARK: - Observations

    /// A handler that cancels its own observation must not be called again: here it still receives every other change
    /// delivered in the same read (`deliver` works on a copy of the handlers taken before the loop).
    @Test func aHandlerThatCancelsItsObservationIsNotCalledAgain() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)  // keeps the listener up after the cancelled one
        let box = ObservationBox()
        let afterCancel = Counter()
        let keys = Counter()
        let everything = Counter()
        let observation = store.observeChanges { change in
            guard case .key = change else { return }
            keys.increment()
            if let observation = box.observation.withLock({ $0 }) {
                observation.cancel()
                box.observation.withLock { $0 = nil }
            } else {
                afterCancel.increment()
            }
        }
        _ = everything
        box.observation.withLock { $0 = observation }
        // One transaction: its notifications arrive together, and are delivered in one go.
        try other.write((0..<20).map { WLStorageStoreWrite(key: "k\($0)", data: bytes("v")) })
        #expect(feed.waitFor(.key("k19")))
        usleep(200_000)
        #expect(keys.count >= 1)
        #expect(afterCancel.count == 0, "the handler was called \(afterCancel.count) times after it cancelled")
    }

    @Test func observationsCancelledFromManyThreadsWhileNotificationsStream() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))
        let stop = StopFlag()
        let writer = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var index = 0
            while !stop.isSet {
                try? other.write(key: "k\(index % 10)", data: bytes("\(index)"))
                index += 1
            }
            writer.signal()
        }
        for _ in 0..<20 {
            let calls = Counter()
            let observation = try #require(store.observeChanges { _ in calls.increment() })
            usleep(UInt32.random(in: 0..<20_000))
            #expect(
                Self.completes(within: 10) {
                    DispatchQueue.concurrentPerform(iterations: 4) { _ in observation.cancel() }
                })
        }
        // Still works afterwards.
        let feed = try FeedRecorder(store)
        #expect(feed.waitFor(.key("k1")) || feed.waitFor(.key("k2")))
        stop.set()
        #expect(writer.wait(timeout: .now() + 20) == .success)
    }

    // MARK: - Connections killed from outside

    @Test func aTerminatedWriteConnectionIsReplacedByTheNextCall() throws {
        let cluster = try PostgresCluster.shared()
        let application = "fault-\(UUID().uuidString.prefix(8))"
        let url = cluster.url + "&application_name=\(application)"
        let store = try WLStoragePostgresStore(url: url, namespace: uniqueNamespace(), timeout: .seconds(5))
        try store.write(key: "k", data: bytes("1"))
        let admin = try Self.admin(cluster.url)
        #expect(try Self.terminate(admin, application: application, where: "query NOT LIKE 'LISTEN%'") == 1)
        usleep(200_000)
        // The connection died while idle: the call finds it so and runs again on a new one.
        try store.write(key: "k", data: bytes("2"))
        #expect(try store.read(key: "k") == bytes("2"))
        // And again, in a batch.
        #expect(try Self.terminate(admin, application: application, where: "query NOT LIKE 'LISTEN%'") == 1)
        usleep(200_000)
        try store.write([WLStorageStoreWrite(key: "a", data: bytes("a")), .init(key: "b", data: bytes("b"))])
        #expect(try store.keys() == ["a", "b", "k"])
        // And in a batch of several chunks, sent in one pipeline.
        #expect(try Self.terminate(admin, application: application, where: "query NOT LIKE 'LISTEN%'") == 1)
        usleep(200_000)
        let chunked = (0..<WLStoragePostgresStore.batchRows * 3).map {
            WLStorageStoreWrite(key: "c\($0)", data: bytes("\($0)"))
        }
        try store.write(chunked)
        #expect(try store.keys().count == 3 + chunked.count)
        #expect(try store.read(key: "c\(chunked.count - 1)") == bytes("\(chunked.count - 1)"))
    }

    @Test func aTerminatedListeningConnectionReportsEverythingOnceBack() throws {
        let cluster = try PostgresCluster.shared()
        let application = "fault-\(UUID().uuidString.prefix(8))"
        let url = cluster.url + "&application_name=\(application)"
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace, timeout: .seconds(5))
        let other = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try other.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)
        feed.clear()
        let admin = try Self.admin(cluster.url)
        // The listening connection's last statement is its LISTEN, its probe, or the lookup of the table a carried
        // change names.
        #expect(
            try Self.terminate(
                admin, application: application,
                where: "(query LIKE 'LISTEN%' OR query = 'SELECT 1' OR query LIKE 'SELECT to_regclass%')") == 1)
        #expect(feed.waitFor(.everything), "the listener did not report everything after it was terminated")
        try other.write(key: "after", data: bytes("1"))
        #expect(feed.waitFor(.key("after")))
        // The store's own writes are still not reported.
        feed.clear()
        try store.write(key: "own", data: bytes("1"))
        try other.write(key: "marker", data: bytes("1"))
        #expect(feed.waitFor(.key("marker")))
        #expect(!feed.reported.contains(.key("own")))
    }

    // MARK: - The table dropped by another program

    @Test func aDroppedTableIsCreatedAgain() throws {
        let cluster = try PostgresCluster.shared()
        let table = "fault_\(UUID().uuidString.prefix(8).lowercased())"
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: uniqueNamespace(), table: table)
        try store.write(key: "k", data: bytes("1"))
        let admin = try Self.admin(cluster.url)
        try Self.sql(admin, "DROP TABLE \(table)")
        // The next write may fail, clearly; one after it must store the value again.
        var failures: [any Error] = []
        for _ in 0..<3 {
            do {
                try store.write(key: "k", data: bytes("2"))
                break
            } catch {
                failures.append(error)
            }
        }
        #expect(failures.count <= 1, "writes keep failing after the table was dropped: \(failures)")
        #expect((try? store.read(key: "k")) == bytes("2"))
    }

    // MARK: - A server that never answers

    /// A Unix socket that accepts connections (the kernel's backlog) and never answers: libpq waits for the server's
    /// first message.
    private final class SilentServer: Sendable {
        let directory: String
        let port = 5433
        let descriptor: Int32

        init() throws {
            directory = NSTemporaryDirectory() + "wlspg-silent-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = "\(directory)/.s.PGSQL.\(port)"
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard bound == 0, listen(descriptor, 128) == 0 else {
                throw PostgresCluster.Failure(description: "could not listen on \(path)")
            }
        }

        var url: String { "host=\(directory) port=\(port) user=nobody password=hunter2secret dbname=db" }

        deinit {
            close(descriptor)
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test func aServerThatNeverAnswersTimesOutWithoutThePassword() throws {
        let server = try SilentServer()
        let store = try WLStoragePostgresStore(url: server.url, timeout: .seconds(1))
        let start = ContinuousClock.now
        let error = try #require(throws: WLStorageError.self) { try store.read(key: "k") }
        let elapsed = start.duration(to: .now)
        #expect(elapsed < .seconds(3))
        #expect(elapsed > .milliseconds(900), "failed at once, not by the timeout: \(error)")
        #expect(!"\(error)".contains("hunter2secret"))
        #expect(!store.identity.contains("hunter2secret"))
        #expect(!store.description.contains("hunter2secret"))
        // The listener tries too, and stops when released.
        let observation = store.observeChanges { _ in }
        usleep(300_000)
        observation?.cancel()
    }

    /// Every call must end within a few timeouts, even with many threads calling while the server never answers:
    /// here each call waits for the writing connection's lock while the calls before it each spend a full timeout
    /// connecting, so the last of 6 threads waits about 6 timeouts.
    @Test func callsFromManyThreadsEndWithinTheTimeoutWhenTheServerNeverAnswers() throws {
        let server = try SilentServer()
        let store = try WLStoragePostgresStore(url: server.url, timeout: .seconds(1))
        let durations = Shared<[Duration]>([])
        // Threads of their own, all at once (`concurrentPerform` would run only as many as there are cores).
        let group = DispatchGroup()
        for index in 0..<6 {
            group.enter()
            Thread.detachNewThread {
                let start = ContinuousClock.now
                if index % 2 == 0 {
                    _ = try? store.read(key: "k\(index)")
                } else {
                    try? store.write(key: "k\(index)", data: bytes("v"))
                }
                let duration = start.duration(to: .now)
                durations.withLock { $0.append(duration) }
                group.leave()
            }
        }
        let ended = group.wait(timeout: .now() + 30) == .success
        #expect(ended)
        let longest = durations.withLock { $0.max() } ?? .zero
        #expect(longest < .seconds(3), "a call took \(longest) with a timeout of 1 s")
        _ = server
    }

    // MARK: - Calls from many threads while the server crashes

    @Test func manyThreadsWhileTheServerCrashesNeitherHangNorLoseAWrite() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        let timeout = 2.0
        let store = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(2))
        let other = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(2))
        try store.write(key: "warm", data: bytes("up"))
        let feed = try FeedRecorder(store)
        let stop = StopFlag()
        let threads = 6
        /// The last value each thread saw stored, and the longest call.
        let lastStored = Shared([Int](repeating: -1, count: threads))
        let longest = Shared(Duration.zero)
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            Thread.detachNewThread {
                var index = 0
                while !stop.isSet {
                    let start = ContinuousClock.now
                    let key = "t\(thread)"
                    do {
                        switch index % 3 {
                        case 0:
                            try store.write(key: key, data: bytes("\(index)"))
                        case 1:
                            try store.write([
                                WLStorageStoreWrite(key: key, data: bytes("\(index)")),
                                WLStorageStoreWrite(key: key + "-batch", data: bytes("\(index)")),
                            ])
                        default:
                            _ = try store.read(key: key)
                        }
                        if index % 3 != 2 { lastStored.withLock { $0[thread] = index } }
                    } catch {}
                    let duration = start.duration(to: .now)
                    longest.withLock { $0 = max($0, duration) }
                    index += 1
                }
                group.leave()
            }
        }
        usleep(300_000)
        try cluster.stop(mode: .immediate)
        usleep(500_000)
        try cluster.start()
        usleep(500_000)
        try cluster.restart(mode: .immediate)
        usleep(500_000)
        stop.set()
        #expect(group.wait(timeout: .now() + timeout * 3 * Double(threads)) == .success, "calls hung")
        let slowest = longest.withLock { $0 }
        #expect(slowest < .seconds(timeout * 3), "a call took \(slowest)")
        // Every write that returned is stored (or a later one).
        for (thread, stored) in lastStored.withLock({ $0 }).enumerated() where stored >= 0 {
            let value = try #require(try other.read(key: "t\(thread)"))
            let number = Int(String(decoding: value, as: UTF8.self)) ?? -1
            #expect(number >= stored, "thread \(thread): \(number) is stored, \(stored) was written")
        }
        #expect(feed.waitFor(.everything))
        try store.write(key: "end", data: bytes("1"))
    }

    @Test func statementsBlockedByAnotherProgramsLockTimeOutAndTheStoreRecovers() throws {
        let cluster = try PostgresCluster.shared()
        let table = "fault_\(UUID().uuidString.prefix(8).lowercased())"
        let store = try WLStoragePostgresStore(
            url: cluster.url, namespace: uniqueNamespace(), table: table, timeout: .seconds(1))
        try store.write(key: "k", data: bytes("1"))
        let admin = try Self.admin(cluster.url)
        try Self.sql(admin, "BEGIN")
        try Self.sql(admin, "LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE")
        let durations = Shared<[Duration]>([])
        let group = DispatchGroup()
        for index in 0..<4 {
            group.enter()
            Thread.detachNewThread {
                let start = ContinuousClock.now
                if index % 2 == 0 {
                    _ = try? store.read(key: "k")
                } else {
                    try? store.write([.init(key: "k", data: bytes("2")), .init(key: "j", data: bytes("2"))])
                }
                let duration = start.duration(to: .now)
                durations.withLock { $0.append(duration) }
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 20) == .success)
        let longest = durations.withLock { $0.max() } ?? .zero
        #expect(longest < .seconds(3), "a call took \(longest) with a timeout of 1 s")
        try Self.sql(admin, "ROLLBACK")
        try store.write(key: "k", data: bytes("3"))
        #expect(try store.read(key: "k") == bytes("3"))
    }

    // MARK: - Batches, values and names

    @Test func batchesOfNothingOfDuplicatesAndWithANulKey() throws {
        let cluster = try PostgresCluster.shared()
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: cluster.url, namespace: namespace)
        try store.write([])
        try store.write(key: "kept", data: bytes("before"))
        try store.write([
            WLStorageStoreWrite(key: "d", data: bytes("1")), .init(key: "d", data: bytes("2")),
            .init(key: "d", data: bytes("3")),
        ])
        #expect(try store.read(key: "d") == bytes("3"))
        let error = try #require(throws: WLStorageError.self) {
            try store.write([
                WLStorageStoreWrite(key: "kept", data: bytes("after")), .init(key: "a\u{0}b", data: bytes("x")),
                .init(key: "new", data: bytes("x")),
            ])
        }
        #expect(error.code == .writeFailed)
        #expect(try store.read(key: "kept") == bytes("before"))
        #expect(try store.read(key: "new") == nil)
        #expect(throws: WLStorageError.self) { try store.read(key: "\u{0}") }
        #expect(throws: WLStorageError.self) { try store.remove(key: "x\u{0}") }
        try store.write(key: "usable", data: bytes("yes"))
        #expect(try store.keys() == ["d", "kept", "usable"])
    }

    @Test func emptyAndLargeValuesAndStrangeNamespaces() throws {
        let cluster = try PostgresCluster.shared()
        let big = Data((0..<1_048_576).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) })
        for name in [
            "quote'\"s", "100%", "%s%n%x", "ünï©ødé 🎉", "back\\slash", ":", "1:", "k:1:x",
            String(repeating: "n", count: 1000),
        ] {
            let namespace = name + UUID().uuidString.prefix(4)
            let trimmed = namespace.utf8.count > 1000 ? String(name) : namespace
            let store = try WLStoragePostgresStore(url: cluster.url, namespace: trimmed)
            let other = try WLStoragePostgresStore(url: cluster.url, namespace: trimmed)
            let feed = try FeedRecorder(store)
            try other.write(key: "empty", data: Data())
            try other.write(key: "big", data: big)
            try other.write(key: "ключ'%", data: bytes("1"))
            #expect(try store.read(key: "empty") == Data())
            #expect(try store.read(key: "big") == big)
            #expect(try store.keys() == ["big", "empty", "ключ'%"])
            #expect(feed.waitFor(.key("ключ'%")), "\(trimmed)")
            #expect(feed.waitFor(.key("big")), "\(trimmed)")
            #expect(!store.identity.contains(" "))
        }
    }

    // MARK: - Stores released at bad times

    @Test func aStoreReleasedWhileItsListenerReconnectsOrACallRuns() throws {
        let cluster = try PostgresCluster()
        defer { cluster.remove() }
        try cluster.start()
        var store: WLStoragePostgresStore? = try WLStoragePostgresStore(url: cluster.url, timeout: .seconds(1))
        try store?.write(key: "k", data: bytes("1"))
        let calls = Counter()
        let observation = store?.observeChanges { _ in calls.increment() }
        #expect(eventually(timeout: 20) { calls.count >= 1 })
        try cluster.stop(mode: .immediate)
        usleep(300_000)  // the listener is now waiting to reconnect
        // A call in flight on another thread holds the store; the test's reference goes.
        let inFlight = DispatchSemaphore(value: 0)
        let captured = store!
        store = nil
        Thread.detachNewThread {
            for _ in 0..<5 { _ = try? captured.read(key: "k") }
            inFlight.signal()
        }
        #expect(inFlight.wait(timeout: .now() + 15) == .success)
        try cluster.start()
        // The observation outlives the store: the listener reconnects and reports everything.
        #expect(eventually(timeout: 20) { calls.count >= 2 })
        observation?.cancel()
        usleep(200_000)
    }
}

/// A value shared between threads.
private final class Shared<Value: Sendable>: Sendable {
    private let lock: Lock<Value>

    init(_ value: Value) {
        lock = Lock(value)
    }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        lock.withLock { body(&$0) }
    }
}

/// A flag that is set once.
private final class StopFlag: Sendable {
    private let flag = Shared(false)
    var isSet: Bool { flag.withLock { $0 } }
    func set() { flag.withLock { $0 = true } }
}
