// A monitor that could not start inotify (no descriptor left) polls the directory meanwhile, and watches it with
// inotify once descriptors are free again.
import Foundation
import Testing

@Suite(.capturingOutput) struct MonitorStartedWithoutDescriptorsTests {
    @Test func aMonitorStartedWithoutDescriptorsWatchesWithInotifyOnceThereAreSome() throws {
        try withTemporaryDirectory { directory in
            let run = try runChild("monitor-without-descriptors", in: directory)
            try #require(run.reason == .exit && run.status == 0, "\(run.reason) \(run.status): \(run.child.lines)")
            // The monitor did start without inotify: no watch while every descriptor was taken.
            #expect(run.child.lines.contains("started 0"), "\(run.child.lines)")
            #expect(run.child.lines.last == "watched", "\(run.child.lines)")
        }
    }
}
