import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Three versions of a type updating one etcd key at once, with a rename and a rollback (see ``ConcurrentVersions``),
/// plain and encrypted.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdConcurrentVersionsTests {
    @Test(arguments: [false, true])
    func updatesOfThreeVersionsAtOnceCountOnceAndKeepEveryField(encrypted: Bool) async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let key = try WLStorageEncryptionKey.random()
            let stores = try [[server.endpoint], [server.otherSpelling], [server.endpoint, server.otherSpelling]].map {
                endpoints -> any WLStorageStore in
                let store = try WLStorageEtcdStore(endpoints: endpoints, namespace: namespace, timeout: .seconds(10))
                return encrypted ? store.encrypted(with: key) : store
            }
            try ConcurrentVersions.updatesOfThreeVersionsAtOnceCountOnceAndKeepEveryField(stores: stores)
        }
    }
}
