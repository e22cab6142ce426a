// Storages of one file share one throttle: the shortest interval among them decides when a change is written.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct SharedThrottleTests {
    /// A storage with `flushInterval: 1` promises that a crash loses "up to about one second of changes". When an
    /// earlier storage of the same file (another part of the program) was opened with `nil`, the shared cell keeps
    /// that one's throttle: the change is never written automatically.
    @Test func aStorageWithAnIntervalWritesAutomaticallyWhenAnotherOfTheSameFileHasNone() throws {
        try withTemporaryDirectory { directory in
            let manual = fileStorage("k", in: directory, default: "", flushInterval: nil)
            manual.flush()
            let automatic = fileStorage("k", in: directory, default: "", flushInterval: 1)
            automatic.wrappedValue = "set"
            #expect(
                eventually(timeout: 30) { stored(String.self, key: "k", in: directory) == "set" },
                "not written within 5 s with an interval of 1 s")
        }
    }
}
