import Dispatch
import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageFleet
import WLStorageTestSupport

/// Several programs of a fleet write one key at once through etcd: two storages of it (as two replicas are, each with a
/// store of its own), and a program that puts, removes, and makes the key anew without a storage. Whatever the order
/// the machine gives their writes, once the last one is made every storage ends holding what etcd holds.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdConvergenceTests {
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func everyStorageEndsHoldingTheStoredValueAfterAFleetsWrites(seed: UInt64) async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let server = try EtcdServer.shared()
            let endpoints = [server.endpoint, server.otherSpelling]
            let stores = try endpoints.map { try WLStorageEtcdStore(endpoints: [$0], namespace: namespace) }
            let storages = stores.map { WLStorage(key: "k", defaultValue: 0, flushInterval: 0, store: $0) }
            // The program without a storage writes through a store of its own.
            let direct = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let failures = Lock<[String]>([])
            let done = DispatchGroup()
            let operations = 100
            for (index, storage) in storages.enumerated() {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    var random = SplitMix64(seed: seed &* 31 &+ UInt64(index))
                    for step in 0..<operations {
                        storage.wrappedValue = (index + 1) * 1_000 + step
                        if Int.random(in: 0..<4, using: &random) == 0 { storage.flush() }
                    }
                    storage.flush()
                }
            }
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                var random = SplitMix64(seed: seed)
                do {
                    for step in 0..<operations {
                        switch Int.random(in: 0..<4, using: &random) {
                        case 0:
                            try direct.remove(key: "k")
                        case 1:
                            // Removed and made anew at once: the key's versions start again.
                            try direct.remove(key: "k")
                            try direct.write(key: "k", data: bytes(String(9_000 + step)))
                        default:
                            try direct.write(key: "k", data: bytes(String(9_000 + step)))
                        }
                    }
                    try direct.write(key: "k", data: bytes("9999"))
                } catch {
                    failures.withLock { $0.append("the direct writes failed: \(error)") }
                }
            }
            try #require(done.wait(timeout: .now() + 300) == .success, "the fleet's writes did not end")
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            for storage in storages { storage.flush() }
            let stored = { () -> Int? in
                (try? direct.read(key: "k")).flatMap { $0 }.flatMap { try? JSONDecoder().decode(Int.self, from: $0) }
            }
            let converged = eventually(timeout: 60) {
                guard let value = stored() else { return false }
                return storages.allSatisfy { $0.wrappedValue == value }
            }
            let held = storages.map(\.wrappedValue)
            #expect(
                converged, "seed \(seed): etcd holds \(stored().map(String.init) ?? "nothing"), the storages \(held)")
        }
    }
}
