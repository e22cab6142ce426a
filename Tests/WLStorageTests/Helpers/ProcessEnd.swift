import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How a child process ended.
///
/// Read from the kernel with `waitid(WNOWAIT)`, not from Foundation alone: `Process` can miss the end of a child that
/// exits at once (its `isRunning` stays true and `waitUntilExit()` spins for ever, seen here with a zombie child). The
/// child is left for Foundation to reap; once it has, Foundation's own record is used.
struct ProcessEnd: Sendable, Equatable {
    let status: Int32
    let signaled: Bool

    var reason: Process.TerminationReason { signaled ? .uncaughtSignal : .exit }

    /// How the child `pid` ended, or `nil` while it runs (or when it is not a child of this process any more).
    static func peek(_ pid: pid_t) -> ProcessEnd? {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 {
            guard errno == EINTR else { return nil }
        }
        let child = info._sifields._sigchld
        guard child.si_pid == pid else { return nil }
        return ProcessEnd(status: child.si_status, signaled: info.si_code != CLD_EXITED)
    }
}

extension Process {
    /// How the process ended, once it has; `nil` while it runs.
    var end: ProcessEnd? {
        if let end = ProcessEnd.peek(processIdentifier) { return end }
        guard !isRunning else { return nil }
        return ProcessEnd(status: terminationStatus, signaled: terminationReason == .uncaughtSignal)
    }

    /// Waits, polling, until the process has ended; kills it after `timeout` seconds and waits for that. `nil` when it
    /// had to be killed.
    func waitForEnd(timeout: Double = 60) -> ProcessEnd? {
        if eventually(timeout: timeout, { end != nil }) { return end }
        kill(processIdentifier, SIGKILL)
        _ = eventually(timeout: 30) { end != nil }
        return nil
    }
}
