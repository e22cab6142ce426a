import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// An encrypted store over the etcd store in a program that has the wrong key: it reads nothing it cannot open, says so
/// clearly, writes nothing by reading, and never replaces the value it cannot open, by any path that writes.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdWrongKeyTests {
    @Test func aProgramWithTheWrongKeyNeverOverwritesTheValueAndSaysWhy() async throws {
        try await onItsOwnThread {
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let key = try WLStorageEncryptionKey.random()
            let rightStore = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
            let writer = WLStorage(
                key: "token", defaultValue: "", flushInterval: 0, store: rightStore.encrypted(with: key))
            writer.wrappedValue = "secret"
            writer.flush()
            let sealed = try #require(try rawEntry(in: server, namespace: namespace, key: "token"))

            let wrongStore = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
                .encrypted(with: try WLStorageEncryptionKey.random())
            let wrong = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: wrongStore)
            #expect(wrong.wrappedValue == "")
            let error = try #require(wrong.lastError, "the wrong key was not reported")
            #expect(error.code == .decodingFailed)
            #expect(error.message.contains("encrypted with another key"), "\(error.message)")
            #expect(error.key == "token")
            // Reading wrote nothing: the key's revision is the writer's.
            wrong.flush()
            #expect(try rawEntry(in: server, namespace: namespace, key: "token")?.revision == sealed.revision)

            // Every path that writes: a set, an update, a flush, a second storage of the program, the flush of all.
            wrong.wrappedValue = "replacement"
            wrong.update { $0 += "!" }
            wrong.flush()
            do {
                let again = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: wrongStore)
                again.wrappedValue = "another"
                again.flush()
            }
            let after = try #require(try rawEntry(in: server, namespace: namespace, key: "token"))
            #expect(after.value == sealed.value && after.revision == sealed.revision, "the sealed value was replaced")
            #expect(wrong.hasPendingChanges, "the change was dropped rather than kept pending")
            #expect(wrong.lastError != nil, "the refusal to write was not said")

            // The program with the right key still reads its value, and its change is taken.
            #expect(writer.wrappedValue == "secret")
            writer.wrappedValue = "next"
            writer.flush()
            #expect(!writer.hasPendingChanges && writer.lastError == nil, "\(writer.lastError?.message ?? "")")
            #expect(try rightStore.encrypted(with: key).read(key: "token") == bytes("\"next\""))
            #expect(
                try rawEntry(in: server, namespace: namespace, key: "token")?.value != sealed.value,
                "the right key's write did not land")
            // The wrong key's program hears that write, cannot open it either, and still writes nothing over it.
            wrong.flush()
            #expect(try rightStore.encrypted(with: key).read(key: "token") == bytes("\"next\""))
        }
    }
}
