import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#endif

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

/// How one call ended: the error it threw (`nil` if it returned) and how long it took.
private struct CallOutcome: Sendable {
    var error: WLStorageError?
    var duration: Duration

    /// Runs `call`, timing it.
    static func of(_ call: () throws -> Void) -> CallOutcome {
        let start = ContinuousClock.now
        do {
            try call()
            return CallOutcome(error: nil, duration: start.duration(to: .now))
        } catch {
            return CallOutcome(error: error as? WLStorageError, duration: start.duration(to: .now))
        }
    }

    /// Whether the call failed because its timeout passed.
    var timedOut: Bool { (error?.underlying as? PostgresError)?.kind == .timedOut }
}

/// Calls that get no answer, from a server that never answers or behind another program's lock, end by their timeout,
/// and the store recovers.
///
/// A call that waited without end would be left hanging on a thread of its own while the test goes on and fails: each
/// waits far longer (60 s or more) than the calls' timeout of 1 s, so that a loaded machine, which only delays the
/// end of a call, never fails it.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresUnansweredCallTests: PostgresFaultSuite {
    @Test func aServerThatNeverAnswersTimesOutWithoutThePassword() throws {
        let server = try SilentServer()
        let store = try WLStoragePostgresStore(url: server.url, timeout: .seconds(1))
        let outcome = Shared<CallOutcome?>(nil)
        let ended = Self.completes(within: 60) {
            let read = CallOutcome.of { _ = try store.read(key: "k") }
            outcome.withLock { $0 = read }
        }
        try #require(ended, "the read still waits for a server that never answers, 60 s after it began")
        let read = try #require(outcome.withLock { $0 })
        let error = try #require(read.error, "the read returned without an answer")
        #expect(read.timedOut, "\(error)")
        // A lower bound only: a loaded machine makes a call longer, never shorter.
        #expect(read.duration >= .seconds(1), "failed at once, not by the timeout: \(error)")
        #expect(!"\(error)".contains("hunter2secret"))
        #expect(!store.identity.contains("hunter2secret"))
        #expect(!store.description.contains("hunter2secret"))
        // The listener tries too, and stops when released.
        let observation = store.observeChanges { _ in }
        usleep(300_000)
        #expect(Self.completes(within: 60) { observation?.cancel() }, "the listener's cancellation hangs")
    }

    /// A call's timeout counts from the call, not from taking the writing connection's lock: with a server that never
    /// answers, each call that holds the lock spends its whole timeout connecting, so that if calls queued behind it
    /// counted theirs from taking the lock, the last of 20 threads would wait 20 timeouts. Every call ends within half
    /// of that: 9 timeouts more than the call needs, which no load of the machine adds to a call that is only late.
    @Test func callsFromManyThreadsEndWithinTheTimeoutWhenTheServerNeverAnswers() throws {
        let server = try SilentServer()
        let timeout = Duration.seconds(1)
        let store = try WLStoragePostgresStore(url: server.url, timeout: timeout)
        let threads = 20
        let outcomes = Shared<[CallOutcome]>([])
        // Threads of their own, all at once (`concurrentPerform` would run only as many as there are cores).
        let group = DispatchGroup()
        for index in 0..<threads {
            group.enter()
            Thread.detachNewThread {
                let outcome = CallOutcome.of {
                    if index % 2 == 0 {
                        _ = try store.read(key: "k\(index)")
                    } else {
                        try store.write(key: "k\(index)", data: bytes("v"))
                    }
                }
                outcomes.withLock { $0.append(outcome) }
                group.leave()
            }
        }
        try #require(group.wait(timeout: .now() + 120) == .success, "calls still wait, 120 s after they began")
        let ended = outcomes.withLock { $0 }
        #expect(ended.count == threads)
        #expect(ended.allSatisfy { $0.timedOut }, "\(ended.compactMap(\.error))")
        let longest = ended.map(\.duration).max() ?? .zero
        #expect(longest < timeout * (threads / 2), "a call took \(longest) with a timeout of \(timeout)")
        _ = server
    }

    /// A statement that waits for a lock another program holds is cancelled at its timeout: every call ends while the
    /// lock is still held (a statement left waiting would wait for as long as it is), and the store works again
    /// once the lock is gone.
    @Test func statementsBlockedByAnotherProgramsLockTimeOutAndTheStoreRecovers() throws {
        let cluster = try PostgresCluster.shared()
        let table = "fault_\(UUID().uuidString.prefix(8).lowercased())"
        let store = try WLStoragePostgresStore(
            url: cluster.url, namespace: uniqueNamespace(), table: table, timeout: .seconds(1))
        // The calls that must succeed are tried until they do: on a loaded machine, connecting and making the table
        // may take longer than the second this store allows a call.
        func succeeds(_ call: () throws -> Void) -> Bool { eventually(timeout: 60) { (try? call()) != nil } }
        try #require(succeeds { try store.write(key: "k", data: bytes("1")) })
        let admin = try Self.admin(cluster.url)
        try Self.sql(admin, "BEGIN")
        try Self.sql(admin, "LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE")
        let outcomes = Shared<[CallOutcome]>([])
        let group = DispatchGroup()
        for index in 0..<4 {
            group.enter()
            Thread.detachNewThread {
                let outcome = CallOutcome.of {
                    if index % 2 == 0 {
                        _ = try store.read(key: "k")
                    } else {
                        try store.write([.init(key: "k", data: bytes("2")), .init(key: "j", data: bytes("2"))])
                    }
                }
                outcomes.withLock { $0.append(outcome) }
                group.leave()
            }
        }
        let ended = group.wait(timeout: .now() + 60) == .success
        let endedWhileLocked = outcomes.withLock { $0 }
        try Self.sql(admin, "ROLLBACK")
        #expect(ended, "calls still wait for the lock, 60 s after they began")
        #expect(endedWhileLocked.count == 4)
        #expect(endedWhileLocked.allSatisfy { $0.timedOut }, "\(endedWhileLocked.map { $0.error.map { "\($0)" } })")
        #expect(succeeds { try store.write(key: "k", data: bytes("3")) })
        #expect(eventually(timeout: 60) { (try? store.read(key: "k")) == bytes("3") })
    }
}
