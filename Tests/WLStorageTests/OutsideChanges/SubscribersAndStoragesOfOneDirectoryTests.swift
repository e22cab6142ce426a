// A directory watched at once by subscribers (as the command-line tool's `watch` and a directory store's feed are) and
// by storages: each ends its own use, and the others go on hearing of changes.
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct SubscribersAndStoragesOfOneDirectoryTests {
    @Test func aSubscriberAndAStorageOfOneDirectoryEachOutliveTheOthersEnd() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            try replaceFromOutside(file, with: "1")
            let path = StorageDirectory(path: directory.path)
            let heard = Atomic<Int>(0)
            var subscription: UInt64? = Runtime.shared.monitor.subscribe(to: "k", in: path) { _ in
                heard.add(1, ordering: .sequentiallyConsistent)
            }
            var storage: WLStorage<Int>? = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(storage?.wrappedValue == 1)

            // The subscriber goes: the storage still hears.
            Runtime.shared.monitor.unsubscribe(try #require(subscription))
            subscription = nil
            try replaceFromOutside(file, with: "2")
            #expect(
                eventually(timeout: 30) { storage?.wrappedValue == 2 }, "the storage has \(storage?.wrappedValue ?? -1)"
            )

            // A subscriber comes back, and the storage goes: the subscriber still hears.
            let again = Runtime.shared.monitor.subscribe(to: "k", in: path) { _ in
                heard.add(1, ordering: .sequentiallyConsistent)
            }
            defer { Runtime.shared.monitor.unsubscribe(again) }
            storage = nil
            let before = heard.load(ordering: .sequentiallyConsistent)
            try replaceFromOutside(file, with: "3")
            #expect(
                eventually(timeout: 30) { heard.load(ordering: .sequentiallyConsistent) > before },
                "the subscriber heard nothing after the storage went")

            // A storage opened again reads the file afresh and hears later changes.
            let reopened = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(reopened.wrappedValue == 3)
            try replaceFromOutside(file, with: "4")
            #expect(eventually(timeout: 30) { reopened.wrappedValue == 4 }, "the storage has \(reopened.wrappedValue)")
        }
    }
}
