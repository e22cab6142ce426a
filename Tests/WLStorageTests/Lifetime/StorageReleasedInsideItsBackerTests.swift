// A storage released from inside its own backer's write writes what was set there within seconds.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct StorageReleasedInsideItsBackerTests {
    /// A storage released from inside its own backer's write "keeps its pending value as above": retried with the
    /// backoff (at least 100 ms, doubling up to 30 s) whatever its flush interval. With an interval of an hour, the
    /// value set from inside the write waits an hour (only the exit flush writes it).
    @Test(arguments: ["backer-release-0", "backer-release-nil-flush", "backer-release-3600"])
    func aStorageReleasedFromInsideItsOwnBackerWritesWhatWasSetThereWithinSeconds(mode: String) throws {
        try withTemporaryDirectory { directory in
            let run = try runChildOfKeyK(mode, in: directory)
            #expect(run.reason == .exit && run.status == 0, "the child ended by \(run.reason) \(run.status)")
            #expect(run.child.lines == ["written"])
        }
    }
}
