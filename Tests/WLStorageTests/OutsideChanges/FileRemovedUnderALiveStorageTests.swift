// A file removed under a live storage.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// Counts the values a subscription delivered.
private final class Delivered<T: Sendable>: Sendable {
    private let values = Lock<[T]>([])
    func append(_ value: T) { values.withLock { $0.append(value) } }
    var all: [T] { values.withLock { $0 } }
}

@Suite(.capturingOutput) struct FileRemovedUnderALiveStorageTests {
    @Test func aRemovedFileBringsBackTheDefaultAndIsNotWrittenAgain() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            let storage = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            storage.wrappedValue = "v"
            storage.flush()
            try #require(stored(String.self, key: "k", in: directory) == "v")
            let delivered = Delivered<String>()
            let queue = DispatchQueue(label: "test.removed")
            let subscription = storage.onChange(queue: queue) { delivered.append($0) }
            defer { subscription.cancel() }

            try #require(unlink(file.path) == 0)
            let reset = eventually(timeout: 30) { storage.wrappedValue == "default" }
            #expect(reset, "the storage still has \(storage.wrappedValue)")
            let notified = eventually(timeout: 30) { delivered.all.contains("default") }
            #expect(notified, "delivered: \(delivered.all)")
            storage.flush()
            #expect(stored(String.self, key: "k", in: directory) != "v")
        }
    }

    @Test func aLocalChangePendingWhenTheFileIsRemovedIsKeptAndWritten() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            let storage = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            storage.wrappedValue = "v"
            storage.flush()
            storage.wrappedValue = "local"
            try #require(unlink(file.path) == 0)
            let looked = eventually { hasHeardWhatIsStored(storage) }
            #expect(looked)
            #expect(storage.wrappedValue == "local")
            storage.flush()
            #expect(stored(String.self, key: "k", in: directory) == "local")
        }
    }
}
