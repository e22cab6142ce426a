// Two backers that call `flushAll` from their writes at the same time do not deadlock.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage

/// Runs the test child in `mode` to its end (killing it after `timeout` seconds).
///
/// Waits without blocking a thread of the cooperative pool, so that a child that hangs holds up no other test.
private func runChildWithoutBlocking(
    _ mode: String, in directory: URL, value: String, timeout: Double
) async throws -> (child: ChildProcess, end: (reason: Process.TerminationReason, status: Int32)?) {
    let child = try ChildProcess(
        "WLStorageTestChild", [mode, directory.path, "k", value], environment: ["SWIFT_BACKTRACE": "enable=no"])
    return (child, await child.exited(timeout: timeout))
}

@Suite(.onTestThreads) struct FlushAllFromBackersTests {
    /// `WLStorageSystem.flushAll()` documents that "a storage whose backer is calling it (from `write(value:)`) is left to
    /// that write", so a backer may call it. Two such backers writing at the same time deadlock: the flushAll inside
    /// X's write (thread 1, X busy on it) waits for Y's job (`ShutdownHandling.flushEverything` keeps every cell
    /// busy on another thread, `needsFlush(from:)`; `StorageCell.flush()` then waits on a semaphore), and the
    /// flushAll inside Y's write (thread 2) waits for X's. With VALUE `exit` it is the exit flush itself that starts
    /// the two writes side by side (the calling thread and a queue thread of `FlushRound`): the program never exits.
    @Test(arguments: ["flush", "exit"])
    func twoBackersCallingFlushAllAtOnceDoNotDeadlock(how: String) async throws {
        try await withTemporaryDirectory { directory in
            let run = try await runChildWithoutBlocking("flushall-two-backers", in: directory, value: how, timeout: 30)
            #expect(run.end != nil, "the child hung (killed after 30 s); it printed \(run.child.lines)")
            #expect(run.end?.reason == .exit && run.end?.status == 0)
            if how == "flush" { #expect(run.child.lines.contains("done")) }
            #expect(stored(String.self, key: "x", in: directory) == "x")
            #expect(stored(String.self, key: "y", in: directory) == "y")
        }
    }
}
