import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// A store's timeout of any length, `.seconds(.max)` meaning none included, and of a fraction of a second: the store is
/// made and works, and libpq's connect timeout is the timeout rounded up to whole seconds, at least 2.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresTimeoutLengthTests {
    @Test func aStoreWithTheLongestTimeoutWritesAndReads() throws {
        let cluster = try PostgresCluster.shared()
        let store = try WLStoragePostgresStore(
            url: cluster.url, namespace: uniqueNamespace(), timeout: .seconds(Int64.max))
        try store.write(key: "k", data: bytes("1"))
        #expect(try store.read(key: "k") == bytes("1"))
    }

    @Test func theConnectTimeoutIsTheTimeoutRoundedUpToWholeSeconds() throws {
        func connectTimeout(_ timeout: Duration) throws -> String? {
            let settings = try PostgresSettings(url: "postgresql://localhost/db", timeout: timeout)
            return zip(settings.keywords, settings.values).first { $0.0 == "connect_timeout" }?.1
        }
        #expect(try connectTimeout(.milliseconds(500)) == "2")
        #expect(try connectTimeout(.milliseconds(2_500)) == "3")
        #expect(try connectTimeout(.seconds(10)) == "10")
        #expect(try connectTimeout(.seconds(Int64.max)) == "2147483647")
    }
}
