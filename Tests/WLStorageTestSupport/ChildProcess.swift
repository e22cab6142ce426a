import Foundation
import Synchronization

/// The directory holding the package's built executables: the one the test bundle runs from.
public let builtProductsDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    .deletingLastPathComponent()

/// The root of the package's sources: the folder of Package.swift, README.md and Docs.
public let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()  // WLStorageTestSupport
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()

/// A program of the package, started as a real child process with its output captured.
///
/// Standard output and standard error are both kept, never forwarded: when the test fails, the `.capturingOutput`
/// trait shows them with its issues (see TestOutput.swift).
public final class ChildProcess: Sendable {
    public let process: Process
    private let output: CapturedOutput
    private let errorOutput: CapturedOutput

    /// Starts `executable` from the build folder with `arguments`, in the test's environment without the variables
    /// named in `unsetting` and with those of `environment`, in `currentDirectory` (the test's own by default), with
    /// `standardInput` (the test's own by default).
    public convenience init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], unsetting: [String] = [],
        currentDirectory: URL? = nil, standardInput: FileHandle? = nil
    ) throws {
        try self.init(
            executableURL: builtProductsDirectory.appendingPathComponent(executable), arguments,
            environment: environment, unsetting: unsetting, currentDirectory: currentDirectory,
            standardInput: standardInput)
    }

    /// Starts the program at `executableURL`, as ``init(_:_:environment:unsetting:currentDirectory:standardInput:)``
    /// starts one of the package's.
    public init(
        executableURL: URL, _ arguments: [String], environment: [String: String] = [:], unsetting: [String] = [],
        currentDirectory: URL? = nil, standardInput: FileHandle? = nil
    ) throws {
        let executable = executableURL.lastPathComponent
        let process = Process()
        process.executableURL = executableURL
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !unsetting.contains($0.key) }
            .merging(environment) { $1 }
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        if let standardInput { process.standardInput = standardInput }
        let output = try CapturedOutput()
        let errorOutput = try CapturedOutput()
        process.standardOutput = output.handle
        process.standardError = errorOutput.handle
        self.process = process
        self.output = output
        self.errorOutput = errorOutput
        try process.run()
        TestRecord.current?.addOutput {
            describeOutput(
                command: [executable] + arguments, standardOutput: output.text, standardError: errorOutput.text)
        }
    }

    /// Everything the child printed so far.
    public var printed: String { output.text }

    /// Everything the child printed on standard error so far.
    public var printedErrors: String { errorOutput.text }

    /// The lines the child printed so far.
    public var lines: [String] { printed.split(separator: "\n").map(String.init) }

    /// Waits until the child has printed `line` at least `count` times. Returns `false` after `timeout` seconds.
    public func waitFor(_ line: String, count: Int = 1, timeout: Double = 60) -> Bool {
        eventually(timeout: timeout) { lines.filter { $0 == line }.count >= count }
    }

    public func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the child to end. Returns `nil` after `timeout` seconds (and kills it).
    public func waitForExit(timeout: Double = 60) -> (reason: Process.TerminationReason, status: Int32)? {
        process.waitForEnd(timeout: timeout).map { ($0.reason, $0.status) }
    }

    /// Waits for the child to end, sleeping without blocking a thread of the test runner's pool, so that a long wait
    /// does not hold up tests that run meanwhile. Returns `nil` after `timeout` seconds (and kills it).
    public func exited(timeout: Double = 60) async -> (reason: Process.TerminationReason, status: Int32)? {
        guard await waitUntil(timeout: timeout, { process.end != nil }), let end = process.end else {
            send(SIGKILL)
            _ = await waitUntil(timeout: 30) { process.end != nil }
            return nil
        }
        return (end.reason, end.status)
    }
}
