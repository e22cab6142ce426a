import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A program of the fleet running as a child process: a socket is its standard input and output (one command a line
/// in, one answer a line out), a file its standard error.
///
/// Started with `posix_spawn` and reaped with `waitpid` by this object alone. A socket rather than a pipe, so that a
/// command sent to a program that has just died fails (`MSG_NOSIGNAL`) instead of raising `SIGPIPE` in the test; every
/// descriptor of the test's side is close-on-exec, so that no other child inherits it and the program's end of input
/// and output are its own.
public final class FleetProcess {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String

        public init(description: String) {
            self.description = description
        }
    }

    public let name: String
    public let pid: pid_t
    private let socket: Int32
    private let errorPath: String
    private var buffer: [UInt8] = []
    private var ended = false

    /// Starts `executable` with `arguments`, in this process's environment.
    public init(name: String, executable: String, arguments: [String]) throws {
        self.name = name
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw Failure(description: "socketpair failed: \(String(cString: strerror(errno)))")
        }
        errorPath = NSTemporaryDirectory() + "/wlstorage-fleet-\(name)-\(UUID().uuidString).err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pair[1], 0)
        posix_spawn_file_actions_adddup2(&actions, pair[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(pair[1])
        guard spawned == 0 else {
            close(pair[0])
            throw Failure(description: "\(executable) could not be started: \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        socket = pair[0]
    }

    deinit {
        if !ended {
            _ = Glibc.kill(pid, SIGKILL)
            _ = reap(timeout: 30)
        }
        close(socket)
        unlink(errorPath)
    }

    /// Sends `command` and returns the program's answer, a line; throws when the program ends, or says nothing for
    /// `timeout` seconds.
    public func ask(_ command: String, timeout: Double = 120) throws -> String {
        let bytes = Array((command + "\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "\(name) did not take \"\(command)\": \(String(cString: strerror(errno)))")
            }
            sent += count
        }
        return try readLine(for: command, timeout: timeout)
    }

    private func readLine(for command: String, timeout: Double) throws -> String {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "\(name) did not answer \"\(command)\" within \(Int(timeout)) s")
            }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 100)
            if ready < 0 && errno != EINTR {
                throw Failure(description: "poll failed: \(String(cString: strerror(errno)))")
            }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4_096)
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer += chunk[..<count]
            } else if count == 0 {
                throw Failure(
                    description: "\(name) ended before it answered \"\(command)\"; its errors: \(errorOutput)")
            } else if errno != EINTR {
                throw Failure(description: "recv failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Kills the program with SIGKILL and waits until it is gone.
    public func kill() throws {
        _ = Glibc.kill(pid, SIGKILL)
        guard let status = reap(timeout: 60) else { throw Failure(description: "\(name) outlived SIGKILL") }
        guard status & 0x7f == SIGKILL else {
            throw Failure(description: "\(name) ended with status \(status) before it was killed: \(errorOutput)")
        }
    }

    /// Has the program exit normally (which flushes its storages), and waits until it has; throws unless it exited
    /// with status 0.
    public func exit(timeout: Double = 120) throws {
        let bytes = Array("exit\n".utf8)
        _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard let status = reap(timeout: timeout) else {
            _ = Glibc.kill(pid, SIGKILL)
            _ = reap(timeout: 30)
            throw Failure(description: "\(name) did not exit within \(Int(timeout)) s")
        }
        guard status == 0 else {
            throw Failure(description: "\(name) exited with status \(status): \(errorOutput)")
        }
    }

    /// Waits for the program's end, polling; returns its wait status, or `nil` after `timeout` seconds.
    private func reap(timeout: Double) -> Int32? {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                ended = true
                return status
            }
            if result < 0 && errno != EINTR {
                ended = true
                return -1
            }
            if ContinuousClock.now >= deadline { return nil }
            usleep(1_000)
        }
    }

    /// What the program printed on standard error so far.
    public var errorOutput: String {
        (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
    }

    /// The codes of the errors the program reported (its `error CODE MESSAGE` lines), with their lines.
    public var reportedErrors: [(code: String, line: String)] {
        errorOutput.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ", maxSplits: 2)
            guard words.count >= 2, words[0] == "error" else { return nil }
            return (String(words[1]), String(line))
        }
    }
}
