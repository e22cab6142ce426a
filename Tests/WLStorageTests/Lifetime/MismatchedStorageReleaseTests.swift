// A storage of a file open with another type, released with a change, is let go instead of retried forever.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.onTestThreads) struct MismatchedStorageReleaseTests {
    /// Guarantees, "Several programs, one file": a storage of a file open with another type "keeps its value in
    /// memory only"; "Storages released with a write left to do": the value "is retried with the backoff ... until it
    /// is written".
    ///
    /// The mismatched storage's cell has a `RefusingBacker`, whose writes always fail. Released with a change (any
    /// set), `StorageCell.storageReleased()` finds work left and has the registry keep the cell (`keep`), urgent:
    /// it is retried every 100 ms, doubling to every 30 s, and reports `typeMismatch` each time, for the life of the
    /// process, for a write that can never succeed (even after the other storage is gone, the cell keeps its refusing
    /// backer). A program that opens such a storage per request leaks one cell and one endless retry per request.
    @Test func aMismatchedStorageReleasedWithAChangeIsLetGo() async throws {
        try await withTemporaryDirectory { directory in
            let text = fileStorage("k", in: directory, default: "text", flushInterval: nil)
            text.flush()
            weak var released: StorageCell<Int>?
            do {
                let number = fileStorage("k", in: directory, default: 7, flushInterval: nil)
                try #require(number.lastError?.code == .typeMismatch)
                number.wrappedValue = 8
                released = number.cell
            }
            #expect(
                await waitUntil(timeout: 30) { released == nil },
                "the mismatched storage's cell is still alive, retrying a write that can never succeed")
            #expect(stored(String.self, key: "k", in: directory) == "text")
        }
    }
}
