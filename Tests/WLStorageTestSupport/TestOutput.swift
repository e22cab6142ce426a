// What the tests print: only the test summary when they pass.
//
// Many tests provoke errors on purpose (failed writes, corrupt files, failing backers), and many start child
// processes. Printed, the package's error lines and the children's standard error would bury the summary of a
// passing run, so:
//
// - the test process has one `WLStorageSystem.errorHandler`, installed once and never replaced, that records every error
//   instead of printing it (`ReportedErrors`). Tests that provoke errors read their storage's `lastError`, or ask the
//   recorder for the errors about their directory;
// - every suite carries the `.capturingOutput` trait: the output of the child processes a test starts (`ChildProcess`,
//   the test children and the tool alike) and the errors reported about the test's temporary directories are kept,
//   and shown with the test's issues when, and only when, it fails.
//
// Every suite runs its tests on threads of its own, a few at a time (`.onTestThreads`, which `.capturingOutput`
// includes; see TestThreads.swift): a test that waits then holds no thread of the concurrency pool.
import Foundation
import Testing
import WLStorage

/// Every error the package reports in the test process, recorded instead of printed.
///
/// `WLStorageSystem.errorHandler` is process-wide and tests run in parallel, so no test replaces the handler: ``install()``
/// sets a recording handler once, and is called by the `.capturingOutput` trait before each test and by the common
/// helpers (``withTemporaryDirectory(_:)``, ``fileStorage(_:in:default:flushInterval:)``, ``RecordingBacker``), so
/// that it is in place before a test's first storage.
public enum ReportedErrors {
    /// The most errors kept; the oldest half is dropped beyond it. No test reads errors that old.
    private static let capacity = 100_000
    private static let recorded = Lock<[WLStorageError]>([])
    private static let installation: Void = {
        WLStorageSystem.errorHandler = { error in
            recorded.withLock { errors in
                if errors.count >= capacity { errors.removeFirst(capacity / 2) }
                errors.append(error)
            }
        }
    }()

    /// Installs the recording handler, the first time only.
    public static func install() {
        installation
    }

    /// The errors recorded so far that `included` accepts, in the order they were reported.
    public static func errors(where included: (WLStorageError) -> Bool) -> [WLStorageError] {
        recorded.withLock { errors in errors.filter(included) }
    }

    /// The errors recorded so far whose path is `directory` or a path under it, in the order they were reported.
    public static func errors(under directory: URL) -> [WLStorageError] {
        let root = directory.standardizedFileURL.path
        return recorded.withLock { errors in
            errors.filter { error in
                guard let path = error.path else { return false }
                return path == root || path.hasPrefix(root.hasSuffix("/") ? root : root + "/")
            }
        }
    }
}

/// What one test started and made, kept to be shown with its failures: the output of its child processes and the
/// temporary directories whose reported errors concern it.
public final class TestRecord: Sendable {
    /// The record of the test running in this task, set by the `.capturingOutput` trait.
    @TaskLocal public static var current: TestRecord?

    private struct State {
        var outputs: [@Sendable () -> String] = []
        var directories: [URL] = []
    }

    private let state = Lock(State())

    public init() {}

    /// Keeps `describe`, which tells what a child process printed, to call when the test fails.
    public func addOutput(_ describe: @escaping @Sendable () -> String) {
        state.withLock { $0.outputs.append(describe) }
    }

    /// Keeps a temporary directory of the test: errors reported about paths in it are shown when the test fails.
    public func addDirectory(_ directory: URL) {
        state.withLock { $0.directories.append(directory) }
    }

    /// What to add to an issue of the test: each child's output, and the errors reported about its directories.
    public func comments() -> [Comment] {
        let (outputs, directories) = state.withLock { ($0.outputs, $0.directories) }
        var comments = outputs.map { Comment(rawValue: $0()) }
        let errors = directories.flatMap(ReportedErrors.errors(under:))
        if !errors.isEmpty {
            let shown = errors.suffix(20)
            let skipped = errors.count - shown.count
            comments.append(
                Comment(
                    rawValue: "errors the package reported about the test's directories"
                        + (skipped > 0 ? " (the last \(shown.count) of \(errors.count))" : "") + ":\n"
                        + shown.map { "  \($0)" }.joined(separator: "\n")))
        }
        return comments
    }
}

/// Records each test's child process output and errors instead of printing them, and adds them to the test's issues.
/// See the top of this file.
public struct CapturingOutputTrait: SuiteTrait, TestTrait, TestScoping {
    public init() {}

    /// A suite passes the trait on to each of its tests.
    public var isRecursive: Bool { true }

    /// Each case of a test gets a record of its own; a suite, or a parameterized test as a whole, none.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        ReportedErrors.install()
        let record = TestRecord()
        let showOutput = IssueHandlingTrait.compactMapIssues { issue in
            var issue = issue
            issue.comments += record.comments()
            return issue
        }
        // On threads of its own, a few tests at a time (see ``TestThreadsExecutor``).
        try await TestThreadsTrait().provideScope(for: test, testCase: testCase) {
            try await TestRecord.$current.withValue(record) {
                try await showOutput.provideScope(for: test, testCase: testCase) {
                    do {
                        try await function()
                    } catch let error where !(error is ExpectationFailedError) {
                        // The runner records an error thrown out of the test after this scope has ended, without
                        // the output; a warning beside it shows the output. (A failed #require was recorded in
                        // the scope.)
                        if !record.comments().isEmpty {
                            Issue.record(
                                "the test threw \(error); what it started and the errors reported follow",
                                severity: .warning, sourceLocation: test.sourceLocation)
                        }
                        throw error
                    }
                }
            }
        }
    }
}

public extension Trait where Self == CapturingOutputTrait {
    /// Errors the package reports are recorded, not printed; child processes' output is shown only with a failure.
    static var capturingOutput: Self { Self() }
}

/// What a child process printed, for an issue's comment: its command line, then its standard output and standard
/// error, each when not empty.
public func describeOutput(command: [String], standardOutput: String, standardError: String) -> String {
    var text = "output of " + command.joined(separator: " ") + ":"
    if standardOutput.isEmpty && standardError.isEmpty { text += " (nothing)" }
    if !standardOutput.isEmpty { text += "\n  standard output:\n" + indented(standardOutput) }
    if !standardError.isEmpty { text += "\n  standard error:\n" + indented(standardError) }
    return text
}

private func indented(_ text: String) -> String {
    text.split(separator: "\n", omittingEmptySubsequences: false)
        .dropLast(text.hasSuffix("\n") ? 1 : 0)
        .map { "    " + $0 }
        .joined(separator: "\n")
}
