// Consumers of `values` coming and going while a thread sets neither hang nor let the backlog grow without bound.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct ValuesChurnTests {
    /// One thread sets a counter as fast as it can, ten subscriptions follow it, and consumers keep starting to
    /// iterate `values` and leaving after the first value. Whichever thread finds no one delivering notifications
    /// delivers all of them, to every listener, for as long as the setter keeps setting: once a consumer's `values`
    /// (which delivers the current value) gets that role, it never returns, and the queue of undelivered values
    /// grows without bound (hundreds of MiB in seconds; 14 GB in half an hour in a test runner that hung on it).
    @Test func consumersComingAndGoingWhileAThreadSetsNeitherHangNorGrowWithoutBound() throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess(
                "WLStorageTestChild", ["values-churn", directory.path, "k"],
                environment: ["SWIFT_BACKTRACE": "enable=no"])
            defer { if child.process.end == nil { child.send(SIGKILL) } }
            // The child prints its resident size every 0.1 s. Generous for a slow build (ThreadSanitizer runs it in
            // about 20 s on two cores, a debug build in about 3 s); a growing backlog ends the wait early.
            func peak() -> Int {
                let last = child.lines.last ?? ""
                return Int(last.split(separator: " ").dropFirst().first ?? "") ?? 0
            }
            let done = eventually(timeout: 120) { child.lines.contains { $0.hasPrefix("done ") } || peak() >= 500 }
            let last = child.lines.last ?? ""
            #expect(done && last.hasPrefix("done "), "the consumers had not all ended (last: \(last))")
            #expect(peak() < 500, "\(peak()) MiB resident")
        }
    }
}
