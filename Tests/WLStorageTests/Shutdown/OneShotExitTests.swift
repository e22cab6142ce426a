import Foundation
import Testing

@testable import WLStorage

/// A value set by one-shot access right before `exit(0)` is written by the exit flush, wherever its storage lives.
@Suite(.capturingOutput)
struct OneShotExitTests {
    @Test(arguments: [
        "one-shot-exit", "one-shot-exit-binding", "one-shot-exit-default-directory", "one-shot-exit-task",
    ])
    func aValueSetByOneShotAccessRightBeforeExitIsWritten(mode: String) throws {
        try withTemporaryDirectory { directory in
            let (_, reason, status) = try runChild(mode, in: directory)
            #expect(reason == .exit)
            #expect(status == 0)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }
}
