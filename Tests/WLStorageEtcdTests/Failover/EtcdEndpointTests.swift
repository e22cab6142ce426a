import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// A store whose first endpoint is dead passes it over, for its calls and for its watch.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdEndpointTests {
    @Test func aDeadEndpointIsPassedOver() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            // Nothing listens on the alternate port of the shared server: connections to it are refused.
            let store = try WLStorageEtcdStore(
                endpoints: [server.alternateEndpoint, server.endpoint], namespace: namespace)
            let recorder = try FeedRecorder(store)
            defer { recorder.cancel() }
            try store.write(key: "k", data: bytes("1"))
            #expect(try store.read(key: "k") == bytes("1"))
            #expect(try store.write(key: "k", data: bytes("2"), ifItHolds: bytes("1")) == true)
            let other = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
            try other.write(key: "elsewhere", data: bytes("1"))
            #expect(eventually(timeout: 60) { recorder.reported.contains(.key("elsewhere")) })
        }
    }
}
