import Foundation
import Synchronization

@testable import WLStorage

/// The directory holding the package's built executables: the one the test bundle runs from.
let builtProductsDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    .deletingLastPathComponent()

/// A program of the package, started as a real child process with its output captured.
final class ChildProcess: Sendable {
    let process: Process
    private let output = Output()

    private final class Output: Sendable {
        let text = Lock<String>("")
    }

    /// Starts `executable` from the build folder with `arguments`.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = builtProductsDirectory.appendingPathComponent(executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.standardError
        self.process = process
        pipe.fileHandleForReading.readabilityHandler = { [output] handle in
            let data = handle.availableData
            if !data.isEmpty { output.text.withLock { $0 += String(decoding: data, as: UTF8.self) } }
        }
        try process.run()
    }

    /// Everything the child printed so far.
    var printed: String { output.text.withLock { $0 } }

    /// The lines the child printed so far.
    var lines: [String] { printed.split(separator: "\n").map(String.init) }

    /// Waits until the child has printed `line` at least `count` times. Returns `false` after `timeout` seconds.
    func waitFor(_ line: String, count: Int = 1, timeout: Double = 60) -> Bool {
        eventually(timeout: timeout) { lines.filter { $0 == line }.count >= count }
    }

    func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the child to end. Returns `nil` after `timeout` seconds (and kills it).
    func waitForExit(timeout: Double = 60) -> (reason: Process.TerminationReason, status: Int32)? {
        guard eventually(timeout: timeout, { !process.isRunning }) else {
            send(SIGKILL)
            return nil
        }
        process.waitUntilExit()
        return (process.terminationReason, process.terminationStatus)
    }
}
