import Foundation
import Testing

@testable import WLStorage

/// A handler of `onChange(queue: nil)` is running, on the thread of the set that called it, when the program ends:
/// by `exit` on another thread, by SIGTERM, or by `exit` from inside the handler. The flush at the end waits for no
/// handler, and writes the storage and what the handler set.
@Suite(.capturingOutput) struct HandlerRunningAtShutdownTests {
    enum Ending: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case exitOnAnotherThread = "handler-blocked-exit"
        case terminatingSignal = "handler-blocked-signal"
        case exitFromTheHandler = "handler-exits"
        var testDescription: String { "\(self)" }
    }

    @Test(arguments: Ending.allCases)
    func theFlushAtTheEndWritesWhatTheRunningHandlerSet(_ ending: Ending) throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess(
                "WLStorageTestChild", [ending.rawValue, directory.path, "key", "flushed"],
                environment: ["SWIFT_BACKTRACE": "enable=no"])
            if ending == .terminatingSignal {
                try #require(child.waitFor("ready"), "the child did not get ready")
                child.send(SIGTERM)
            }
            let end = try #require(child.waitForExit(timeout: 60), "the child did not end")
            switch ending {
            case .terminatingSignal:
                #expect(end.reason == .uncaughtSignal)
                #expect(end.status == SIGTERM)
            default:
                #expect(end.reason == .exit)
                #expect(end.status == 0)
            }
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
            #expect(stored(String.self, key: "key-also", in: directory) == "flushed")
        }
    }
}
