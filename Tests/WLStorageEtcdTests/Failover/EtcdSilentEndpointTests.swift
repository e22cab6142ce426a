import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A store with two endpoints, one of which stops answering without a word (a ``TCPProxy`` that holds its
/// connections, as a member behind a partition does): the store's calls go on through the other endpoint.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdSilentEndpointTests {
    @Test func writesAndUpdatesGoOnThroughTheOtherEndpointWhenOneStopsAnswering() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let silent = try TCPProxy(to: server.clientPort)
            let other = try TCPProxy(to: server.clientPort)
            defer {
                silent.stop()
                other.stop()
            }
            let store = try WLStorageEtcdStore(
                endpoints: [silent.endpoint, other.endpoint], namespace: namespace, timeout: .seconds(2))
            let note = WLStorage(key: "note", defaultValue: 0, flushInterval: nil, store: store)
            let counter = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
            note.wrappedValue = 1
            note.flush()
            #expect(!note.hasPendingChanges, "\(note.lastError?.message ?? "")")

            // The first endpoint, which answered last, stops answering.
            silent.set(.holding)
            for value in 2...6 {
                note.wrappedValue = value
                #expect(
                    eventually(timeout: 60) {
                        note.flush()
                        return !note.hasPendingChanges
                    }, "the set to \(value) was not written: \(note.lastError?.message ?? "")")
                counter.update { $0 += 1 }
            }
            #expect(try rawEntry(in: server, namespace: namespace, key: "note")?.value == bytes("6"))
            let count = try rawEntry(in: server, namespace: namespace, key: "counter")?.value
            #expect(count == bytes("5"), "\(count.map { String(decoding: $0, as: UTF8.self) } ?? "nothing")")
        }
    }
}
