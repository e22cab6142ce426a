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
    private let output: Int32
    private let errors: Int32

    /// Starts a replica of `key` in `namespace` at `url` and waits until its observers are in place. With
    /// `encryptionKey` (the base64 text of a key), the replica's store is encrypted with it.
    convenience init(
        url: String, namespace: String, key: String = "x", flushInterval: Int = 1, encryptionKey: String? = nil
    ) throws {
        try self.init(arguments: [url, namespace, key, String(flushInterval)], encryptionKey: encryptionKey)
    }

    /// Starts the test child with `arguments` (see its usage) and waits until it prints `ready`.
    init(arguments: [String], encryptionKey: String? = nil) throws {
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
        output = try Self.temporaryFile()
        errors = try Self.temporaryFile()
        process.standardInput = pipe
        process.standardOutput = FileHandle(fileDescriptor: output, closeOnDealloc: false)
        process.standardError = FileHandle(fileDescriptor: errors, closeOnDealloc: false)
        try process.run()
        self.process = process
        self.input = pipe.fileHandleForWriting
        try #require(waitFor("ready"), "the replica did not get ready: \(printed) \(printedErrors)")
    }

    deinit {
        if process.end == nil { kill(process.processIdentifier, SIGKILL) }
        try? input.close()
        close(output)
        close(errors)
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
        kill(process.processIdentifier, signal)
    }

    /// Everything the replica printed so far, line by line.
    var lines: [String] { printed.split(separator: "\n").map(String.init) }

    var printed: String { Self.read(output) }
    var printedErrors: String { Self.read(errors) }

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

    private static func temporaryFile() throws -> Int32 {
        var template = Array("/tmp/wlspg-replica-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return descriptor
    }

    private static func read(_ descriptor: Int32) -> String {
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
