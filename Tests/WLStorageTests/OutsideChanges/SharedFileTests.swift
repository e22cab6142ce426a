import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct SharedFileTests {
    @Test func twoStoragesOfTheSameFileShareOneValueAndOneThrottle() throws {
        try withTemporaryDirectory { directory in
            let first = fileStorage("shared", in: directory, default: 0, flushInterval: nil)
            let second = fileStorage("shared", in: directory, default: 0, flushInterval: nil)
            #expect(first.cell === second.cell)
            first.wrappedValue = 41
            #expect(second.wrappedValue == 41)
            second.wrappedValue = 42
            first.flush()
            #expect(stored(Int.self, key: "shared", in: directory) == 42)
            #expect(!second.hasPendingChanges)
        }
    }

    @Test func aChangeThroughOneNotifiesObserversOfTheOther() throws {
        try withTemporaryDirectory { directory in
            let first = fileStorage("shared", in: directory, default: "", flushInterval: nil)
            let second = fileStorage("shared", in: directory, default: "", flushInterval: nil)
            let fired = Atomic<Bool>(false)
            _ = withObservationTracking {
                second.wrappedValue
            } onChange: {
                fired.store(true, ordering: .sequentiallyConsistent)
            }
            first.wrappedValue = "changed"
            let didFire = fired.load(ordering: .sequentiallyConsistent)
            #expect(didFire)
        }
    }

    @Test func anotherValueTypeForTheSameFileIsAClearErrorAndTheFileIsUntouched() throws {
        try withTemporaryDirectory { directory in
            let numbers = fileStorage("mixed", in: directory, default: 5, flushInterval: nil)
            numbers.flush()
            let text = fileStorage("mixed", in: directory, default: "text", flushInterval: nil)
            #expect(text.lastError?.code == .typeMismatch)
            // The message names both Swift types as a user writes them, not the package's internal ones.
            let message = text.lastError?.message ?? ""
            #expect(message.contains("a storage of Int has the file in use"), "\(message)")
            #expect(message.contains("this storage's type is String"), "\(message)")
            #expect(text.lastError?.message.contains("StorageCell") == false)
            #expect(text.wrappedValue == "text")
            text.wrappedValue = "other"
            text.flush()
            #expect(stored(Int.self, key: "mixed", in: directory) == 5)
            #expect(numbers.wrappedValue == 5)
            #expect(numbers.lastError == nil)
        }
    }

    @Test func whenTheLastStorageOfAFileIsGoneANewOneReadsTheFileAgain() throws {
        try withTemporaryDirectory { directory in
            do {
                let storage = fileStorage("again", in: directory, default: 0, flushInterval: nil)
                storage.wrappedValue = 3
            }
            try Data("9".utf8).write(to: directory.appendingPathComponent("again"))
            #expect(fileStorage("again", in: directory, default: 0, flushInterval: nil).wrappedValue == 9)
        }
    }
}
