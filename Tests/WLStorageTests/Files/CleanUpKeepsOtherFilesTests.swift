// The clean-up of temporary files keeps every other file.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct CleanUpKeepsOtherFilesTests {
    @Test func filesThatOnlyLookLikeTemporaryFilesSurviveTheFirstStorageOfTheDirectory() throws {
        try withTemporaryDirectory { directory in
            let draft = directory.appendingPathComponent("report~draft.tmp")
            let fifo = directory.appendingPathComponent("x~y.tmp")
            try Data("a user's draft".utf8).write(to: draft)
            #expect(mkfifo(fifo.path, 0o600) == 0)
            let run = try runChild("open", in: directory)
            #expect(run.status == 0)
            #expect(exists(draft), "\(entries(of: directory))")
            #expect(exists(fifo), "\(entries(of: directory))")
        }
    }
}
