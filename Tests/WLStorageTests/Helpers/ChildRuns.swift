// A run of the test child to its end, for the tests of what a crash or an exit does.
import Foundation
import Testing

@testable import WLStorage

/// Runs the test child in `mode` to its end and returns it with how it ended.
func runChild(
    _ mode: String, in directory: URL, key: String = "key", value: String = "flushed",
    environment: [String: String] = [:], timeout: Double = 60
) throws -> (child: ChildProcess, reason: Process.TerminationReason, status: Int32) {
    // A crash report takes seconds to print and says nothing the fatal error line does not.
    let child = try ChildProcess(
        "WLStorageTestChild", [mode, directory.path, key, value],
        environment: environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 })
    let end = try #require(child.waitForExit(timeout: timeout), "the child did not end")
    return (child, end.reason, end.status)
}

/// Runs the test child in `mode` to its end.
func runChildOfKeyK(
    _ mode: String, in directory: URL, key: String = "k", value: String = "value", timeout: Double = 60
) throws -> (child: ChildProcess, reason: Process.TerminationReason, status: Int32) {
    let child = try ChildProcess(
        "WLStorageTestChild", [mode, directory.path, key, value], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let end = try #require(child.waitForExit(timeout: timeout), "the child did not end")
    return (child, end.reason, end.status)
}
