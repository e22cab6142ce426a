import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// The settings a store is made with, checked without a server.
@Suite(.onTestThreads)
struct EtcdStoreSettingsTests {
    @Test func endpointsThatAreNotURLsAreRefusedWithoutTheirPassword() {
        for endpoints in [[], ["127.0.0.1:2379"], ["http://user:secret@127.0.0.1:2379"], ["http://h:1/path"]] {
            #expect {
                try WLStorageEtcdStore(endpoints: endpoints)
            } throws: { error in
                guard let error = error as? WLStorageError else { return false }
                return error.code == .invalidConfiguration && !error.description.contains("secret")
            }
        }
        #expect(throws: WLStorageError.self) { try WLStorageEtcdStore(endpoints: ["http://h:1"], namespace: "") }
    }

    @Test func anIdentityNamesTheEndpointsAndTheNamespace() throws {
        let one = try WLStorageEtcdStore(endpoints: ["http://b:2379", "http://a:2379/"], namespace: "n/1")
        let two = try WLStorageEtcdStore(endpoints: ["http://a:2379", "http://b:2379"], namespace: "n/1")
        #expect(one.identity == two.identity)
        #expect(one.identity == "etcd:http://a:2379,http://b:2379#n%2F1")
        #expect(try WLStorageEtcdStore(endpoints: ["http://a:2379"], namespace: "n").identity != one.identity)
    }
}
