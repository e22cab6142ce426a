// A backer that hangs does not keep the shutdown flush from writing the other storages.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct ShutdownWithAHungBackerTests {
    /// One storage whose backer hangs (a network store that stopped answering) must not keep SIGTERM from writing
    /// the thirty other storages' pending values: systemd kills the program after its stop timeout, and everything
    /// not yet written is lost. Today the exit flush writes storages one after another, in the registry's order, and
    /// stops for good at the hung one.
    @Test func aHungBackerDoesNotKeepSIGTERMFromWritingTheOtherStorages() throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess(
                "WLStorageTestChild", ["shutdown-hung", directory.path, "k"],
                environment: ["SWIFT_BACKTRACE": "enable=no"])
            defer { if child.process.end == nil { child.send(SIGKILL) } }
            try #require(child.waitFor("ready"))
            child.send(SIGTERM)
            func written() -> Int {
                (0..<30).filter { stored(String.self, key: "k\($0)", in: directory) == "pending \($0)" }.count
            }
            #expect(eventually(timeout: 60) { written() == 30 }, "\(written()) of 30 written after SIGTERM")
        }
    }
}
