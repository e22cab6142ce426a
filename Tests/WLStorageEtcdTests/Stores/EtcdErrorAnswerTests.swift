import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorageEtcd

/// etcd's gateway ends the answer of a request etcd refuses with an HTTP trailer. The client reads it as the refusal it
/// is: read with `URLSession` on Linux, such an answer stopped the program (`Transfer completed, but there's no
/// response`).
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdErrorAnswerTests {
    @Test func anAnswerEtcdRefusesIsARefusalNotTheEndOfTheProgram() async throws {
        try await onItsOwnThread {
            let endpoint = try #require(URL(string: try EtcdServer.shared().endpoint))
            let client = EtcdClient(endpoints: [endpoint], timeout: .seconds(10))
            // A transaction that puts one key twice, which etcd refuses.
            let put = RequestOp(requestPut: PutRequest(key: Data("twice".utf8), value: Data("1".utf8)))
            do {
                let _: TxnResponse = try client.call(
                    "v3/kv/txn", TxnRequest(compare: [], success: [put, put]), resending: false)
                Issue.record("etcd took a transaction that puts one key twice")
            } catch let error as EtcdFailure {
                #expect(error.outcome == .refused, "\(error)")
                #expect(error.description.contains("duplicate"), "\(error)")
            }
        }
    }
}
