import Foundation
import Synchronization
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// What a storage's update and flush promise when the server is far and its connections break: each program reaches
/// etcd through a ``TCPProxy`` that delays every chunk by 10 ms each way and cuts every connection now and then.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdWriteAcknowledgementTests {
    /// Cuts every connection of `proxies` every 100 to 400 ms until stopped.
    private final class Cutter: Sendable {
        private let stopped = Atomic<Bool>(false)
        private let done = DispatchSemaphore(value: 0)
        let cuts = Atomic<Int>(0)

        init(_ proxies: [TCPProxy]) {
            Thread.detachNewThread { [self] in
                while !stopped.load(ordering: .relaxed) {
                    usleep(UInt32.random(in: 100_000...400_000))
                    for proxy in proxies { proxy.cutAll() }
                    cuts.add(1, ordering: .relaxed)
                }
                done.signal()
            }
        }

        func stop() {
            guard !stopped.exchange(true, ordering: .relaxed) else { return }
            done.wait()
        }
    }

    /// Two programs each make 20 updates of one counter while their connections are cut: every update lands once, none
    /// is reported lost, and the counter ends at 40.
    @Test func updatesLandExactlyOnceWhileConnectionsAreCut() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let proxies = try (0..<2).map { _ in try TCPProxy(to: server.clientPort) }
            defer { for proxy in proxies { proxy.stop() } }
            for proxy in proxies { proxy.delay(.milliseconds(10)) }
            let storages = try proxies.map { proxy in
                WLStorage(
                    key: "counter", defaultValue: 0, flushInterval: 0,
                    store: try WLStorageEtcdStore(
                        endpoints: [proxy.endpoint], namespace: namespace, timeout: .seconds(5))
                )
            }
            let cutter = Cutter(proxies)
            defer { cutter.stop() }
            let finished = DispatchGroup()
            for storage in storages {
                finished.enter()
                Thread.detachNewThread {
                    for _ in 0..<20 { storage.update { $0 += 1 } }
                    storage.flush()
                    finished.leave()
                }
            }
            #expect(finished.wait(timeout: .now() + 300) == .success, "the updates did not end")
            cutter.stop()
            #expect(cutter.cuts.load(ordering: .relaxed) > 0)
            let stored = try rawEntry(in: server, namespace: namespace, key: "counter")?.value
            #expect(
                stored == bytes("40"), "etcd holds \(stored.map { String(decoding: $0, as: UTF8.self) } ?? "nothing")")
            let lost = ReportedErrors.errors {
                $0.key == "counter" && $0.message.contains("the update") && $0.message.contains(namespace)
            }
            #expect(lost.isEmpty, "updates reported lost: \(lost.map(\.message))")
            for storage in storages {
                #expect(eventuallyHolds(storage, 40), "a program holds \(storage.wrappedValue)")
            }
        }
    }

    /// Thirty values set and flushed one after the other while connections are cut: a flush returns once its value is
    /// in etcd, or with the error said and the value still pending; once the connections stay up, the last value is
    /// stored.
    @Test func aFlushReturnsOnlyOnceTheValueIsStoredOrWithAnError() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let proxy = try TCPProxy(to: server.clientPort)
            defer { proxy.stop() }
            proxy.delay(.milliseconds(10))
            let store = try WLStorageEtcdStore(endpoints: [proxy.endpoint], namespace: namespace, timeout: .seconds(2))
            let storage = WLStorage(key: "cursor", defaultValue: "", flushInterval: nil, store: store)
            let cutter = Cutter([proxy])
            defer { cutter.stop() }
            var written = 0
            var failed = 0
            for index in 0..<30 {
                storage.wrappedValue = "v\(index)"
                storage.flush()
                if storage.hasPendingChanges {
                    #expect(storage.lastError != nil, "flush \(index) returned with the value pending and no error")
                    failed += 1
                } else {
                    let stored = try rawEntry(in: server, namespace: namespace, key: "cursor")?.value
                    #expect(stored == bytes("\"v\(index)\""), "flush \(index) returned before its value was stored")
                    written += 1
                }
            }
            cutter.stop()
            #expect(written > 0, "no flush wrote (\(failed) failed)")
            #expect(
                eventually(timeout: 60) {
                    storage.flush()
                    return !storage.hasPendingChanges
                }, "\(storage.lastError?.message ?? "")")
            #expect(try rawEntry(in: server, namespace: namespace, key: "cursor")?.value == bytes("\"v29\""))
        }
    }
}
