// A `values` stream dropped unused, or left early by a `for await` loop, leaves no listener behind.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct ValuesStreamLifetimeTests {
    @Test func aValuesStreamMadeAndDroppedUnusedLeavesNoListener() throws {
        try withTemporaryDirectory { directory in
            let stored = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            do { _ = stored.values }
            #expect(eventually(timeout: 30) { stored.cell.listenerCount == 0 }, "\(stored.cell.listenerCount) left")
        }
    }

    @Test func leavingAForAwaitLoopEarlyLeavesNoListener() async throws {
        try await withTemporaryDirectory { directory in
            let stored = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            for await _ in stored.values { break }
            #expect(await waitUntil(timeout: 30) { stored.cell.listenerCount == 0 })
        }
    }
}
