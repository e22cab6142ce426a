import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// What the error of a batch on condition that failed says of its writes.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdConditionalBatchFailureTests {
    /// A batch on condition of three transactions that reaches no endpoint: its error says none of its writes may have
    /// been stored (``WLStorageError/storedWrites`` 0), so that a flush writes each on its own as a refused one.
    @Test func aBatchOnConditionThatReachedNoEndpointSaysNoneWasSent() async throws {
        try await onItsOwnThread {
            // A server made but not started: nothing listens on its client port.
            let server = try EtcdServer()
            defer { server.remove() }
            let store = try WLStorageEtcdStore(
                endpoints: [server.endpoint], namespace: uniqueNamespace(), timeout: .seconds(1))
            let batch = (0..<300).map { WLStorageStoreWrite(key: String(format: "k%03d", $0), data: bytes("1")) }
            #expect {
                _ = try store.write(batch, ifTheyHold: batch.map { _ in nil })
            } throws: { error in
                guard let error = error as? WLStorageError else { return false }
                return error.code == .writeFailed && error.storedWrites == 0
            }
        }
    }
}
