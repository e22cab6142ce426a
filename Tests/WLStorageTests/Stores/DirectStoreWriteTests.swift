import Foundation
import Testing

@testable import WLStorage

/// A write or a removal made through a directory store itself, not through a storage, is a change for the storages of
/// the key in that store.
@Suite(.capturingOutput)
struct DirectStoreWriteTests {
    @Test func writesAndARemovalThroughTheStoreItselfReachTheStoragesOfTheKey() throws {
        try withTemporaryDirectory { directory in
            let store = WLStorageDirectoryStore.directory(directory)
            try store.write(key: "k", data: Data("1".utf8))
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: 0, store: store)
            #expect(storage.wrappedValue == 1)
            for value in 2...3 {
                try store.write(key: "k", data: Data("\(value)".utf8))
                #expect(eventually(timeout: 30) { storage.wrappedValue == value })
            }
            try store.remove(key: "k")
            #expect(eventually(timeout: 30) { storage.wrappedValue == 0 })
        }
    }
}
