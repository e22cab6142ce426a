import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#endif

/// A replica: the test child (WLStoragePostgresTestChild) running as a process of its own, with one storage of an Int
/// in a PostgreSQL store, driven through its standard input.
final class Replica: Sendable {
    private let process: Process
    private let input: FileHandle
    private let output: CapturedOutput
    private let errors: CapturedOutput

    /// Starts a replica of `key` in `namespace` at `url` and waits until its observers are in place. With
    /// `encryptionKey` (the base64 text of a key), the replica's store is encrypted with it.
    convenience init(
        url: String, namespace: String, key: String = "x", flushInterval: Int = 1, encryptionKey: String? = nil
    ) throws {
        try self.init(arguments: [url, namespace, key, String(flushInterval)], encryptionKey: encryptionKey)
    }

    /// Starts the test child with `arguments` (see its usage) and waits until it prints `ready`; with `awaitingReady`
    /// false, does not wait (the `--fleet` mode prints only answers to commands).
    init(arguments: [String], encryptionKey: String? = nil, awaitingReady: Bool = true) throws {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let process = Process()
        process.executableURL = directory.appendingPathComponent("WLStoragePostgresTestChild")
        process.arguments = arguments
        if let encryptionKey {
            var environment = ProcessInfo.processInfo.environment
            environment["WLSTORAGE_TEST_ENCRYPTION_KEY"] = encryptionKey
            process.environment = environment
        }
        let pipe = Pipe()
        output = try CapturedOutput()
        errors = try CapturedOutput()
        process.standardInput = pipe
        process.standardOutput = output.handle
        process.standardError = errors.handle
        try process.run()
        self.process = process
        self.input = pipe.fileHandleForWriting
        guard awaitingReady else { return }
        try #require(waitFor("ready"), "the replica did not get ready: \(printed) \(printedErrors)")
    }

    deinit {
        if process.end == nil { kill(process.processIdentifier, SIGKILL) }
        try? input.close()
    }

    /// Sends one command line.
    func send(_ command: String) {
        try? input.write(contentsOf: Data((command + "\n").utf8))
    }

    /// Sets the value and waits until the replica has.
    func set(_ value: Int) throws {
        let count = lines.filter { $0 == "set \(value)" }.count
        send("set \(value)")
        try #require(waitFor("set \(value)", count: count + 1), "the replica did not set \(value)")
    }

    /// Sends `signal` to the replica.
    func signal(_ signal: Int32) {
        // A process never launched has the pid 0, which would signal the test runner's whole process group.
        let pid = process.processIdentifier
        if pid > 0 { kill(pid, signal) }
    }

    /// Everything the replica printed so far, line by line.
    var lines: [String] { printed.split(separator: "\n").map(String.init) }

    var printed: String { output.text }
    var printedErrors: String { errors.text }

    /// Waits until the replica has printed `line` at least `count` times.
    func waitFor(_ line: String, count: Int = 1, timeout: Double = 30) -> Bool {
        eventually(timeout: timeout) { lines.filter { $0 == line }.count >= count }
    }

    /// Waits until every observer of the replica (Observation, `values`, `onChange`) last saw `value`.
    func waitUntilObserversSee(_ value: Int, timeout: Double = 30) -> Bool {
        eventually(timeout: timeout) {
            let lines = self.lines
            return ["observed", "values", "changed"].allSatisfy { kind in
                lines.last { $0.hasPrefix(kind + " ") } == "\(kind) \(value)"
            }
        }
    }

    /// Waits until the replica has ended; kills it after `timeout` seconds. Returns how it ended.
    func waitForExit(timeout: Double = 30) -> (reason: Process.TerminationReason, status: Int32)? {
        guard eventually(timeout: timeout, { process.end != nil }), let end = process.end else {
            signal(SIGKILL)
            return nil
        }
        return (end.reason, end.status)
    }
}
