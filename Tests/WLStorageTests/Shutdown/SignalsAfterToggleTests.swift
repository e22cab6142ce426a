// Signals after flushesOnSignals is switched off and on again.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct SignalsAfterToggleTests {
    @Test func switchingFlushesOnSignalsOffAndOnAgainStillFlushesOnSIGTERM() throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess("WLStorageTestChild", ["signals-toggle", directory.path, "key", "flushed"])
            defer { if child.process.end == nil { child.send(SIGKILL) } }
            try #require(child.waitFor("ready"))
            #expect(stored(String.self, key: "key", in: directory) == "", "the value was written before the signal")
            child.send(SIGTERM)
            let end = try #require(child.waitForExit())
            #expect(end.reason == .uncaughtSignal)
            #expect(end.status == SIGTERM)
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }
}
