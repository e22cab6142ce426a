// The watches of released storages are released.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct WatchLeakTests {
    @Test func releasingTheStoragesOfTwoHundredDirectoriesReleasesTheirWatches() throws {
        try withTemporaryDirectory { directory in
            let run = try runChild("watch-leak", in: directory, value: "keep")
            try #require(run.status == 0)
            let baseline = try #require(run.child.lines.first { $0.hasPrefix("baseline ") })
            let after = try #require(run.child.lines.first { $0.hasPrefix("after ") })
            #expect(after.dropFirst("after ".count) == baseline.dropFirst("baseline ".count), "\(run.child.lines)")
        }
    }

    @Test func removedDirectoriesOfReleasedStoragesAreNotWatchedAgainWhenTheyReturn() throws {
        try withTemporaryDirectory { directory in
            let run = try runChild("watch-leak", in: directory, value: "remove")
            try #require(run.status == 0)
            let baseline = try #require(run.child.lines.first { $0.hasPrefix("baseline ") }).dropFirst(
                "baseline ".count)
            let after = try #require(run.child.lines.first { $0.hasPrefix("after ") }).dropFirst("after ".count)
            let recreated = try #require(run.child.lines.first { $0.hasPrefix("after-recreate ") })
                .dropFirst("after-recreate ".count)
            #expect(after == baseline, "\(run.child.lines)")
            #expect(recreated == baseline, "\(run.child.lines)")
        }
    }
}
