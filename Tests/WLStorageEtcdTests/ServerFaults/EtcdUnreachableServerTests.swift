import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A store whose calls cannot reach a server (nothing listens on its port): every call fails within the timeout with
/// an error that names the endpoint, a storage keeps its value pending, and writes it once a server listens there.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdUnreachableServerTests {
    @Test func callsFailClearlyWithinTheTimeoutAndThePendingValueIsWrittenOnceTheServerListens() async throws {
        try await onItsOwnThread {
            // A server made but not started: nothing listens on its client port yet.
            let server = try EtcdServer()
            defer { server.remove() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace, timeout: .seconds(2))

            // Each call ends within its timeout (a margin for a loaded machine), and says what it could not reach.
            let started = ContinuousClock.now
            #expect {
                _ = try store.read(key: "k")
            } throws: { error in
                guard let error = error as? WLStorageError else { return false }
                return error.code == .readFailed && error.message.contains(server.endpoint)
                    && error.message.contains("no endpoint answered")
            }
            #expect {
                try store.write(key: "k", data: bytes("1"))
            } throws: { error in
                guard let error = error as? WLStorageError else { return false }
                return error.code == .writeFailed && error.message.contains(server.endpoint)
            }
            #expect {
                _ = try store.write(key: "k", data: bytes("1"), ifItHolds: nil)
            } throws: { ($0 as? WLStorageError)?.code == .writeFailed }
            #expect(ContinuousClock.now - started < .seconds(30), "the calls outlasted their timeouts")

            // A storage starts from its default, says why, and keeps its change pending.
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
            #expect(storage.wrappedValue == 0)
            #expect(storage.lastError?.code == .readFailed, "\(String(describing: storage.lastError))")
            storage.wrappedValue = 5
            storage.flush()
            #expect(storage.hasPendingChanges)
            // The flush reads what is stored before it writes: the read's failure is the error.
            let error = try #require(storage.lastError)
            #expect([.readFailed, .writeFailed].contains(error.code), "\(error)")
            #expect(
                error.message.contains(server.endpoint) && error.message.contains("no endpoint answered"), "\(error)")

            // The server starts on that port: the value is written, and nothing else.
            try server.start()
            #expect(
                eventually(timeout: 60) {
                    storage.flush()
                    return !storage.hasPendingChanges
                }, "\(storage.lastError?.message ?? "")")
            #expect(try rawEntry(in: server, namespace: namespace, key: "k")?.value == bytes("5"))
            #expect(storage.wrappedValue == 5)
        }
    }
}
