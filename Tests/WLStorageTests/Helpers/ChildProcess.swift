import Foundation
import Synchronization

@testable import WLStorage

/// The directory holding the package's built executables: the one the test bundle runs from.
let builtProductsDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    .deletingLastPathComponent()

/// The root of the package's sources: the folder of Package.swift, README.md and Docs.
let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()  // Helpers
    .deletingLastPathComponent()  // WLStorageTests
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()

/// A program of the package, started as a real child process with its output captured.
///
/// Standard output and standard error are both kept, never forwarded: when the test fails, the `.capturingOutput`
/// trait shows them with its issues (see TestOutput.swift).
final class ChildProcess: Sendable {
    let process: Process
    private let output: CapturedOutput
    private let errorOutput: CapturedOutput

    /// Starts `executable` from the build folder with `arguments`, in the test's environment without the variables
    /// named in `unsetting` and with those of `environment`.
    init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], unsetting: [String] = []
    ) throws {
        let process = Process()
        process.executableURL = builtProductsDirectory.appendingPathComponent(executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !unsetting.contains($0.key) }
            .merging(environment) { $1 }
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
    var printed: String { output.text }

    /// Everything the child printed on standard error so far.
    var printedErrors: String { errorOutput.text }

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
        process.waitForEnd(timeout: timeout).map { ($0.reason, $0.status) }
    }

    /// Waits for the child to end, sleeping without blocking a thread of the test runner's pool, so that a long wait
    /// does not hold up tests that run meanwhile. Returns `nil` after `timeout` seconds (and kills it).
    func exited(timeout: Double = 60) async -> (reason: Process.TerminationReason, status: Int32)? {
        guard await waitUntil(timeout: timeout, { process.end != nil }), let end = process.end else {
            send(SIGKILL)
            _ = await waitUntil(timeout: 30) { process.end != nil }
            return nil
        }
        return (end.reason, end.status)
    }
}

/// A file that a child process writes its output to, and the test reads at any time.
///
/// A file rather than a pipe: what the child wrote before it ended is all there as soon as it has ended, with no end of
/// file to wait for (a pipe's end can be held open by another test's child that inherited it while being started),
/// and a chatty child never blocks. The file is removed at once; the open descriptor keeps it until it is closed.
private final class CapturedOutput: Sendable {
    private let descriptor: Int32

    init() throws {
        var template = Array((NSTemporaryDirectory() + "/wlstorage-child-output-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // Only the child started with it as its output needs it; another test's child inheriting it is harmless.
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// The descriptor, for the child's standard output or error; the child gets a copy of it.
    var handle: FileHandle {
        FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
    }

    /// Everything written so far.
    var text: String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if count > 0 {
                bytes += chunk[..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
