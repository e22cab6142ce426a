// A `flush()` from an observer of another program's change is not taken for a call from inside the backer.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct FlushFromAnObserverTests {
    /// An observer's `onChange` for another program's change runs while the cell's check job is still marked busy on
    /// that thread, so a `flush()` there is taken for a call from inside the backer: it returns without writing and
    /// reports `reentrantCall`, "called from inside this storage's own backer", which it was not.
    @Test func aFlushFromAnObserverOfAnOutsideChangeIsNotTakenForABackerCall() throws {
        try withTemporaryDirectory { directory in
            let observed = fileStorage("k", in: directory, default: "", flushInterval: nil)
            observed.flush()
            let errors = Lock<[String]>([])
            let done = DispatchSemaphore(value: 0)
            let other = fileStorage("other", in: directory, default: "", flushInterval: nil)
            withObservationTracking {
                _ = observed.wrappedValue
            } onChange: {
                // Record what the app saw, in another storage, and make it durable.
                other.wrappedValue = "saw a change"
                other.flush()
                observed.flush()
                if let error = observed.lastError { errors.withLock { $0.append(error.code.name) } }
                done.signal()
            }
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            try #require(done.wait(timeout: .now() + 60) == .success)
            #expect(errors.withLock { $0 } == [], "flush() from an observer reported \(errors.withLock { $0 })")
            #expect(stored(String.self, key: "other", in: directory) == "saw a change")
        }
    }
}
