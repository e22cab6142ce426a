import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Storages over the etcd store against a real server: values that another program sees, updates that add up across
/// stores, and changes that travel through the feed, also across a restart of the server.
///
/// "Another program" is a store of the same server and namespace reached through `localhost` rather than
/// `127.0.0.1`: its identity differs, so that its storages hold values of their own in this process, as another
/// program's would.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdStorageTests {
    struct Settings: Codable, Equatable, Sendable {
        var theme = "dark"
        var fontSize = 12
        var tags: [String] = []
    }

    @Test func aStoredStructIsSeenByAnotherProgram() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let storage = WLStorage(key: "settings", defaultValue: Settings(), flushInterval: nil, store: store)
            storage.wrappedValue = Settings(theme: "light", fontSize: 14, tags: ["a/b", "ü"])
            storage.flush()
            #expect(storage.lastError == nil, "\(String(describing: storage.lastError))")

            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            #expect(other.identity != store.identity)
            let stored = try #require(try other.read(key: "settings"))
            #expect(try JSONDecoder().decode(Settings.self, from: stored).fontSize == 14)
            let seen = WLStorage(key: "settings", defaultValue: Settings(), flushInterval: nil, store: other)
            #expect(seen.wrappedValue == Settings(theme: "light", fontSize: 14, tags: ["a/b", "ü"]))
        }
    }

    /// 4 threads × 50 increments, two threads on a storage of each of two stores: every increment counts once.
    @Test func incrementsFromFourThreadsOverTwoStoresAddUp() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let stores = try [server.endpoint, server.otherSpelling].map {
                try WLStorageEtcdStore(endpoints: [$0], namespace: namespace)
            }
            let storages = stores.map { WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: $0) }
            let groups = (0..<4).map { index in
                startThread {
                    for _ in 0..<50 { storages[index % 2].update { $0 += 1 } }
                }
            }
            for group in groups { #expect(group.wait(timeout: .now() + 300) == .success, "the increments ended") }
            let stored = try #require(try stores[0].read(key: "n"))
            #expect(try JSONDecoder().decode(Int.self, from: stored) == 200)
            for storage in storages {
                #expect(storage.lastError == nil, "\(String(describing: storage.lastError))")
                #expect(eventuallyHolds(storage, 200), "each storage ends holding the total")
            }
        }
    }

    @Test func theFeedBringsAnotherProgramsWriteToALiveStorage() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let storage = WLStorage(key: "flag", defaultValue: "off", flushInterval: nil, store: store)
            #expect(storage.wrappedValue == "off")
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            // The watch may not be made yet when the first write comes (a change before it is not the feed's to
            // report, but its `.everything` makes the storage read the key): either way the storage takes it.
            try other.write(key: "flag", data: bytes("\"on\""))
            #expect(eventuallyHolds(storage, "on"))
            try other.write(key: "flag", data: bytes("\"again\""))
            #expect(eventuallyHolds(storage, "again"))
            try other.remove(key: "flag")
            #expect(eventuallyHolds(storage, "off"), "a removal brings back the default")
        }
    }

    /// The server is killed under a live watch and started again on another port, where another program writes while
    /// the watch cannot reach it; then on its own port. The watch resumes from the revision after the last one it saw:
    /// it reports the keys written meanwhile, and never `.everything` again, and the storage ends holding the last
    /// value.
    @Test func aWatchWhoseServerRestartsMissesNoChange() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.started()
            defer { server.remove() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let recorder = try FeedRecorder(store)
            defer { recorder.cancel() }
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
            #expect(storage.wrappedValue == 0)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            try other.write(key: "k", data: bytes("1"))
            #expect(eventuallyHolds(storage, 1))

            server.stop()
            try server.start(onAlternatePort: true)
            let away = try WLStorageEtcdStore(endpoints: [server.alternateEndpoint], namespace: namespace)
            for value in 2...5 { try away.write(key: "k", data: bytes(String(value))) }
            try away.write(key: "other", data: bytes("1"))
            server.stop()
            #expect(storage.wrappedValue == 1, "the storage cannot have heard of the writes yet")
            try server.start()

            #expect(eventuallyHolds(storage, 5), "the storage takes the last value written while its watch was away")
            #expect(eventually(timeout: 60) { recorder.reported.contains(.key("other")) })
            #expect(recorder.everythingCount == 1, "the watch resumed: \(recorder.reported)")
            try other.write(key: "k", data: bytes("6"))
            #expect(eventuallyHolds(storage, 6), "the watch goes on after its resumption")
        }
    }

    /// The server is replaced by another cluster on the same port (its data directory wiped): the watch cannot
    /// resume there, starts anew, and reports `.everything`, which makes the storage read its key.
    @Test func aWatchWhoseClusterWasReplacedReadsEverything() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.started()
            defer { server.remove() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let recorder = try FeedRecorder(store)
            defer { recorder.cancel() }
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            for value in 1...5 { try other.write(key: "k", data: bytes(String(value))) }
            #expect(eventuallyHolds(storage, 5))

            server.stop()
            try FileManager.default.removeItem(at: server.directory.appendingPathComponent("data"))
            try server.start(onAlternatePort: true)
            // The new cluster's revision (2) is behind the one the watch would resume from (6 or more).
            try WLStorageEtcdStore(endpoints: [server.alternateEndpoint], namespace: namespace)
                .write(key: "k", data: bytes("100"))
            server.stop()
            try server.start()

            #expect(eventually(timeout: 60) { recorder.everythingCount == 2 }, "\(recorder.reported)")
            #expect(eventuallyHolds(storage, 100))
        }
    }

    /// The revision the watch would resume from is compacted while it cannot reach the server: it starts anew, and
    /// reports `.everything`, which makes the storage read its key.
    @Test func aWatchWhoseRevisionWasCompactedReadsEverything() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.started()
            defer { server.remove() }
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let recorder = try FeedRecorder(store)
            defer { recorder.cancel() }
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
            #expect(storage.wrappedValue == 0)

            server.stop()
            try server.start(onAlternatePort: true)
            let away = try WLStorageEtcdStore(endpoints: [server.alternateEndpoint], namespace: namespace)
            for value in 1...3 { try away.write(key: "k", data: bytes(String(value))) }
            try server.compact(through: server.alternateEndpoint)
            server.stop()
            try server.start()

            #expect(eventually(timeout: 60) { recorder.everythingCount == 2 }, "\(recorder.reported)")
            #expect(eventuallyHolds(storage, 3))
        }
    }
}
