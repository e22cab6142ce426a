import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// What a store refuses at once, and that no message shows the password. No server is needed.
@Suite(.onTestThreads) struct PostgresSettingsTests {
    @Test(arguments: [
        "postgresql://ada:s3cret%zz@localhost/db",
        "postgresql://ada:s3cret@localhost/db?bogus=1",
        "postgresql://ada:s3cret@[::1/db",
        "host=localhost password=s3cret bogus=1",
        "host=localhost password='s3cret",
    ])
    func aConnectionStringLibpqCannotParseIsRefusedWithoutThePassword(url: String) throws {
        let error = try #require(throws: WLStorageError.self) { try WLStoragePostgresStore(url: url) }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("connection string"))
        #expect(!"\(error)".contains("s3cret"), "\(error)")
    }

    @Test(arguments: ["", "1table", "a.b.c", "bad-name", "quote\"d", "x; DROP", String(repeating: "t", count: 49)])
    func anInvalidTableNameIsRefused(table: String) throws {
        let error = try #require(throws: WLStorageError.self) {
            try WLStoragePostgresStore(url: "host=/tmp", table: table)
        }
        #expect(error.code == .invalidConfiguration)
    }

    @Test func anInvalidNamespaceIsRefused() throws {
        for namespace in ["", "a\u{0}b", String(repeating: "n", count: 1_001)] {
            #expect(throws: WLStorageError.self) { try WLStoragePostgresStore(url: "host=/tmp", namespace: namespace) }
        }
    }

    @Test func aServerThatCannotBeReachedIsAnErrorOfEachCallWithoutThePassword() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wlspg-absent-\(UUID())")
        let store = try WLStoragePostgresStore(
            url: "postgresql://ada:s3cret@/db?host=\(directory.path)&port=5999&password=s3cret",
            timeout: .seconds(2))
        #expect(!store.identity.contains("s3cret"))
        #expect(!store.description.contains("s3cret"))
        #expect(!store.identity.contains("ada"))
        for call in [{ _ = try store.read(key: "k") }, { try store.write(key: "k", data: Data()) }] {
            let error = try #require(throws: WLStorageError.self, performing: call)
            #expect([.readFailed, .writeFailed].contains(error.code))
            #expect(error.message.contains("could not connect"), "\(error)")
            #expect(!"\(error)".contains("s3cret"), "\(error)")
        }
    }

    @Test func aRefusedLoginIsAClearErrorWithoutThePasswordAndAStorageKeepsItsDefault() throws {
        ReportedErrors.install()
        let cluster = try PostgresCluster.shared()
        // The test cluster trusts every local connection, so the login is refused by naming a role that does not
        // exist.
        let url = cluster.url.replacingOccurrences(of: "user=postgres", with: "user=nobody_here&password=s3cret")
        let store = try WLStoragePostgresStore(url: url, namespace: uniqueNamespace(), timeout: .seconds(60))
        let error = try #require(serverRefusal { _ = try store.read(key: "k") }, "the read did not fail")
        #expect(error.code == .readFailed)
        #expect(error.message.contains("nobody_here"), "\(error)")
        #expect(!"\(error)".contains("s3cret"), "\(error)")

        let storage = WLStorage(key: "k", defaultValue: 7, flushInterval: nil, store: store)
        #expect(storage.wrappedValue == 7)
        #expect(storage.lastError?.code == .readFailed)
        #expect(!"\(String(describing: storage.lastError))".contains("s3cret"))
    }
}
