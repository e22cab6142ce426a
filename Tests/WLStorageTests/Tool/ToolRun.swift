import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What a finished run of the tool printed, and how it ended.
struct ToolResult {
    /// The exit status, or the signal's number when `signaled`.
    var status: Int32
    /// Whether the process was ended by a signal.
    var signaled: Bool
    var stdout: String
    var stderr: String
}

/// One run of the `wlstorage` binary that `swift test` builds beside the test bundle.
///
/// Standard output and error go to files in the test's directory (never to pipes, so a chatty child cannot
/// block), and the child's environment is the test's own without the variables that select a default
/// directory, plus `environment`. Nothing is forwarded to the test's output: a failing test shows both files with its
/// issues (the `.capturingOutput` trait).
final class ToolRun {
    static let tool = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        .deletingLastPathComponent().appendingPathComponent("wlstorage")

    private let process = Process()
    private let outputURL: URL
    private let errorURL: URL

    init(
        _ arguments: [String], executable: URL = ToolRun.tool, environment: [String: String] = [:], in root: URL
    ) throws {
        let id = UUID().uuidString
        outputURL = root.appendingPathComponent("\(id).out")
        errorURL = root.appendingPathComponent("\(id).err")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)

        var childEnvironment = ProcessInfo.processInfo.environment
        for name in ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME", "HOME"] { childEnvironment[name] = nil }
        childEnvironment.merge(environment) { $1 }

        process.executableURL = executable
        process.arguments = arguments
        process.environment = childEnvironment
        process.currentDirectoryURL = root
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.run()
        TestRecord.current?.addOutput { [outputURL, errorURL] in
            describeOutput(
                command: [executable.lastPathComponent] + arguments, standardOutput: Self.contents(of: outputURL),
                standardError: Self.contents(of: errorURL))
        }
    }

    /// The text of the file at `url`, empty when there is none.
    private static func contents(of url: URL) -> String {
        String(decoding: FileManager.default.contents(atPath: url.path) ?? Data(), as: UTF8.self)
    }

    /// Runs the tool to its end.
    static func run(
        _ arguments: [String], executable: URL = ToolRun.tool, environment: [String: String] = [:], in root: URL
    ) async throws -> ToolResult {
        let tool = try ToolRun(arguments, executable: executable, environment: environment, in: root)
        return await tool.finish()
    }

    /// What the tool has printed on standard output so far.
    var printed: String {
        Self.contents(of: outputURL)
    }

    /// Waits until the lines printed so far are `lines`. Returns `false` after `timeout` seconds.
    func waitForLines(_ lines: [String], timeout: Double = 60) async -> Bool {
        let expected = lines.map { $0 + "\n" }.joined()
        return await eventually(timeout: timeout) { () async in printed == expected }
    }

    /// Waits until what the tool has printed on standard error satisfies `condition`. Returns `false` after
    /// `timeout` seconds.
    func waitForError(timeout: Double = 60, _ condition: (String) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { () async in
            condition(Self.contents(of: errorURL))
        }
    }

    func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the tool to end, killing it after `timeout` seconds, and returns what it printed.
    func finish(timeout: Double = 60) async -> ToolResult {
        let ended = await eventually(timeout: timeout) { () async in process.end != nil }
        if !ended {
            send(SIGKILL)
            Issue.record("wlstorage \(process.arguments ?? []) did not end within \(timeout) s; killed it")
            _ = await eventually(timeout: 30) { () async in process.end != nil }
        }
        let end = process.end
        return ToolResult(
            status: end?.status ?? -1,
            signaled: end?.signaled ?? true,
            stdout: printed,
            stderr: Self.contents(of: errorURL))
    }
}
/// An exclusive `flock` on a file, as a writer holds on its temporary file while it is at work.
final class WriterLock {
    private var descriptor: CInt

    init(on url: URL) throws {
        descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard flock(descriptor, LOCK_EX) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    func release() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
    }

    deinit { release() }
}
