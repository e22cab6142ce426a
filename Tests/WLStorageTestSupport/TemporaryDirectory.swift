import Foundation
import Testing

/// A fresh directory for one test, removed when `body` returns.
public func withTemporaryDirectory<R>(_ body: (URL) throws -> R) throws -> R {
    let url = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url)
}

/// A fresh directory for one test, removed when `body` returns.
public func withTemporaryDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
    let url = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url)
}

private func makeTemporaryDirectory() throws -> URL {
    ReportedErrors.install()
    var template = Array((NSTemporaryDirectory() + "/wlstorage-tests-XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard let made else { throw CocoaError(.fileWriteUnknown) }
    let url = URL(fileURLWithPath: String(cString: made), isDirectory: true).standardizedFileURL
    TestRecord.current?.addDirectory(url)
    return url
}

/// The names of the entries of `directory`, sorted.
public func entries(of directory: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
}

/// The permission bits of the file or directory at `url`, without following a symlink.
public func mode(of url: URL) -> mode_t? {
    var status = stat()
    guard lstat(url.path, &status) == 0 else { return nil }
    return status.st_mode & 0o7777
}

/// How long a poll may go on: `seconds` of the poller's own time.
///
/// A gap between two polls longer than 100 ms, when the poller was not scheduled because the machine or the test
/// runner's pool of threads was busy, counts as 100 ms: whatever the poll waits for could not run either, so that time
/// is not held against it. A wait still ends after ten times `seconds` on the wall clock.
public struct Patience {
    private let seconds: Double
    private let start = ContinuousClock.now
    private var lastPoll = ContinuousClock.now
    private var spent: Duration = .zero

    public init(seconds: Double) {
        self.seconds = seconds
    }

    /// Counts the time since the last poll; true once the wait has run out.
    public mutating func hasRunOut() -> Bool {
        let now = ContinuousClock.now
        spent += min(now - lastPoll, .milliseconds(100))
        lastPoll = now
        return spent >= .seconds(seconds) || now - start >= .seconds(seconds * 10)
    }
}

/// Polls `condition` every `interval` (10 ms unless told) until it holds or `timeout` seconds of patience pass.
/// Returns whether it held.
public func eventually(timeout: Double = 30, every interval: Duration = .milliseconds(10), _ condition: () -> Bool)
    -> Bool
{
    var patience = Patience(seconds: timeout)
    let microseconds = UInt32(interval / .microseconds(1))
    while !patience.hasRunOut() {
        if condition() { return true }
        usleep(microseconds)
    }
    return condition()
}

/// Polls `condition` every `interval` (10 ms unless told), sleeping without blocking a thread, until it holds or
/// `timeout` seconds of patience pass. Returns whether it held.
public func waitUntil(
    timeout: Double = 30, every interval: Duration = .milliseconds(10), _ condition: () async -> Bool
) async -> Bool {
    var patience = Patience(seconds: timeout)
    while !patience.hasRunOut() {
        if await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return await condition()
}

/// Polls an async `condition` every `interval` (10 ms unless told) until it holds or `timeout` seconds pass. Returns
/// whether it held.
public func eventually(
    timeout: Double = 30, every interval: Duration = .milliseconds(10), _ condition: () async -> Bool
) async -> Bool {
    await waitUntil(timeout: timeout, every: interval, condition)
}
