import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Two threads flush every storage of an etcd store over and over beside sets, updates and another program's writes on
/// condition (see ``FlushOfEveryStorageRace``): the batches on condition, refused or not, lose and repeat nothing.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdFlushOfEveryStorageRaceTests {
    @Test func twoFlushesOfEveryStorageAtOnceBesideSetsAndUpdatesKeepEveryChange() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try WLStorageEtcdStore(
                endpoints: [server.endpoint], namespace: namespace, timeout: .seconds(10))
            // Another program: a handle of the same keys with an identity of its own.
            let outside = try WLStorageEtcdStore(
                endpoints: [server.otherSpelling], namespace: namespace, timeout: .seconds(10))
            try FlushOfEveryStorageRace.twoFlushesAtOnceBesideSetsAndUpdatesKeepEveryChange(
                store: store, outside: outside, keys: (0..<12).map { String(format: "job%02d", $0) }, rounds: 40)
        }
    }
}
