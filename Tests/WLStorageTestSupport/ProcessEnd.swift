import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How a child process ended.
///
/// Read from the kernel with `waitid(WNOWAIT)`, not from Foundation alone: `Process` can miss the end of a child that
/// exits at once (its `isRunning` stays true and `waitUntilExit()` spins for ever, seen here with a zombie child). The
/// child is left for Foundation to reap; once it has, Foundation's own record is used.
public struct ProcessEnd: Sendable, Equatable {
    public let status: Int32
    public let signaled: Bool

    public init(status: Int32, signaled: Bool) {
        self.status = status
        self.signaled = signaled
    }

    public var reason: Process.TerminationReason { signaled ? .uncaughtSignal : .exit }

    /// What the kernel says of a child.
    public enum Peek {
        /// It ended and waits to be reaped.
        case ended(ProcessEnd)
        /// It runs.
        case running
        /// It is not a child of this process (any more): it was reaped.
        case reaped
    }

    /// How the child `pid` is: ended (not reaped yet), running, or reaped already.
    public static func peek(_ pid: pid_t) -> Peek {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 {
            guard errno == EINTR else { return .reaped }
        }
        let child = info._sifields._sigchld
        guard child.si_pid == pid else { return .running }
        return .ended(ProcessEnd(status: child.si_status, signaled: info.si_code != CLD_EXITED))
    }
}

extension Process {
    /// How the process ended, once it has; `nil` while it runs. Once it has returned an end, it returns the same one.
    ///
    /// Foundation reaps the child on a thread of its own (`waitpid`), and only then clears `isRunning`: in between, the
    /// kernel has no child to tell of and Foundation has no record yet. Read as "running", that moment made an end
    /// seen a poll earlier vanish (a wait that saw the tool end then returned `nil`, a compiler's status read as -1)
    /// on a busy machine, where Foundation's thread can be kept off the processor for a while right there. A reaped
    /// child has ended: its end is Foundation's record, waited for.
    public var end: ProcessEnd? {
        // `isRunning` first: once it is false, Foundation's record is complete, and the pid may belong to another child.
        if !isRunning { return recordedEnd }
        switch ProcessEnd.peek(processIdentifier) {
        case .ended(let end): return end
        case .running: return nil
        case .reaped:
            // Reaped by Foundation, which is about to clear `isRunning`: its record comes once it has.
            guard eventually(timeout: 60, { !isRunning }) else { return nil }
            return recordedEnd
        }
    }

    /// Foundation's record of how the process ended; only once `isRunning` is false.
    private var recordedEnd: ProcessEnd {
        ProcessEnd(status: terminationStatus, signaled: terminationReason == .uncaughtSignal)
    }

    /// Waits, polling, until the process has ended; kills it after `timeout` seconds and waits for that. `nil` when it
    /// had to be killed.
    public func waitForEnd(timeout: Double = 60) -> ProcessEnd? {
        var seen: ProcessEnd?
        let ended = eventually(timeout: timeout) {
            seen = end
            return seen != nil
        }
        if ended { return seen }
        kill(processIdentifier, SIGKILL)
        _ = eventually(timeout: 30) { end != nil }
        return nil
    }
}
