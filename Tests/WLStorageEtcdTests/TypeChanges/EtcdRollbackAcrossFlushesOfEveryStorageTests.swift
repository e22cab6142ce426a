import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A fleet deployed V1 → V2 → V3 and rolled back to V2 on etcd keys, each program's changes written by flushes of every
/// storage (see ``RollbackDeploy``), plain and encrypted.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdRollbackAcrossFlushesOfEveryStorageTests {
    @Test(arguments: [false, true])
    func everyVersionsFieldsSurviveARollbackAcrossFlushesOfEveryStorage(encrypted: Bool) async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let key = try WLStorageEncryptionKey.random()
            // Six programs: handles of one namespace whose endpoints are spelled differently (host names are not case
            // sensitive, identities are).
            let port = server.endpoint.split(separator: ":").last.map(String.init) ?? ""
            let spellings = [
                [server.endpoint], [server.otherSpelling], [server.endpoint, server.otherSpelling],
                ["http://LOCALHOST:\(port)"], ["http://Localhost:\(port)"], ["http://localHost:\(port)"],
            ]
            let handles = try spellings.map { endpoints -> any WLStorageStore in
                let store = try WLStorageEtcdStore(endpoints: endpoints, namespace: namespace, timeout: .seconds(10))
                return encrypted ? store.encrypted(with: key) : store
            }
            try RollbackDeploy.everyVersionsFieldsSurviveARollbackAcrossFlushesOfEveryStorage(
                programs: handles, keys: (0..<12).map { String(format: "settings%02d", $0) })
        }
    }
}
