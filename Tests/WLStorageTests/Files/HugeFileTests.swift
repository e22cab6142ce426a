// A huge sparse file is reported, not read.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct HugeFileTests {
    @Test func aTerabyteSparseFileIsReportedNotACrash() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("key")
            let fd = open(file.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            try #require(fd >= 0)
            try #require(ftruncate(fd, 1 << 40) == 0)
            close(fd)
            let run = try runChild("open-report", in: directory)
            #expect(run.reason == .exit, "the child crashed: \(run.reason) \(run.status)")
            #expect(run.status == 0)
            let reported = run.child.lines.first { $0.hasPrefix("error ") }
            #expect(reported != nil && reported != "error none", "\(run.child.lines)")
            let kept = entries(of: directory).contains { name in
                var status = stat()
                return lstat(directory.appendingPathComponent(name).path, &status) == 0 && status.st_size == 1 << 40
            }
            #expect(kept, "\(entries(of: directory))")
        }
    }

    /// A limit set to `Int.max` would let a sparse file of a terabyte be allocated in full: the limit stops at 1 GiB.
    /// Asked of the rule the setter applies, not set: the limit is the process's, and the tests running beside read it.
    @Test func theMaximumValueSizeCannotBeSetBeyondOneGibibyte() {
        #expect(ValueSizeLimit.clamped(Int.max) == 1 << 30)
        #expect(ValueSizeLimit.clamped((1 << 30) + 1) == 1 << 30)
        #expect(ValueSizeLimit.clamped(1 << 30) == 1 << 30)
        #expect(ValueSizeLimit.clamped(0) == 1)
    }
}
