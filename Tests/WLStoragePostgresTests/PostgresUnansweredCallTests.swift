import Foundation
import Testing
import WLStorage

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

/// Calls that get no answer, from a server that never answers or behind another program's lock, end within the
/// timeout, and the store recovers.
@Suite(.enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresUnansweredCallTests: PostgresFaultSuite {
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
}
