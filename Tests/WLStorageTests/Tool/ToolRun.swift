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

/// One run of the `wlstorage` binary that `swift test` builds beside the test bundle, as a ``ChildProcess``.
///
/// The child runs in `root`, with nothing on its standard input, and its environment is the test's own without the
/// variables that select a default directory, plus `environment`. Nothing is forwarded to the test's output: a failing
/// test shows what the child printed with its issues (the `.capturingOutput` trait).
final class ToolRun {
    static let tool = builtProductsDirectory.appendingPathComponent("wlstorage")

    private let child: ChildProcess

    init(
        _ arguments: [String], executable: URL = ToolRun.tool, environment: [String: String] = [:], in root: URL
    ) throws {
        child = try ChildProcess(
            executableURL: executable, arguments, environment: environment,
            unsetting: ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME", "HOME"], currentDirectory: root,
            standardInput: FileHandle.nullDevice)
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
        child.printed
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
            condition(child.printedErrors)
        }
    }

    func send(_ signal: Int32) {
        child.send(signal)
    }

    /// Waits for the tool to end, killing it after `timeout` seconds, and returns what it printed.
    func finish(timeout: Double = 60) async -> ToolResult {
        let end = await child.exited(timeout: timeout)
        if end == nil {
            Issue.record("wlstorage \(child.process.arguments ?? []) did not end within \(timeout) s; killed it")
        }
        return ToolResult(
            status: end?.status ?? -1,
            signaled: end.map { $0.reason == .uncaughtSignal } ?? true,
            stdout: printed,
            stderr: child.printedErrors)
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
