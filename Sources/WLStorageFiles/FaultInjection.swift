import Foundation
import Synchronization
import WLStorageCore

/// The system calls that ``StorageDirectory`` makes, by name, so that a test can fail or stall any of them.
package enum SystemCall: String, Sendable, CaseIterable {
    case mkdir, open, read, write, fsync, close, rename, link, unlink, stat, flock, chmod
}

/// What an injected fault does to one system call.
package enum InjectedFault: Sendable, Equatable {
    /// The call is not made; it returns -1 with this `errno` (`EIO`, `ENOSPC`, `EMFILE`, `EINTR`, …).
    case fail(Int32)
    /// The call is made after this many microseconds: a slow disk or a stalled server.
    case stall(microseconds: UInt32)
}

/// A test seam below the file backer: every system call ``StorageDirectory`` makes asks its directory's plan, if any,
/// whether to fail or stall; a plan sees the call and the entry (`nil`: the directory, `..`: a parent), outside locks.
package enum FaultInjection {
    package typealias Plan = @Sendable (_ call: SystemCall, _ name: String?) -> InjectedFault?

    /// Installs `plan` for the directory at `path` (its ``StorageDirectory/path``), replacing any other.
    package static func install(_ plan: @escaping Plan, forDirectory path: String) {
        // The plan replaced is returned, to be released outside the lock.
        _ = FileSystemState.shared.faultPlans.withLock { plans in
            let old = plans.updateValue(plan, forKey: path)
            if old == nil { FileSystemState.shared.faultPlanCount.add(1, ordering: .sequentiallyConsistent) }
            return old
        }
    }

    package static func remove(forDirectory path: String) {
        _ = FileSystemState.shared.faultPlans.withLock { plans in
            let old = plans.removeValue(forKey: path)
            if old != nil { FileSystemState.shared.faultPlanCount.subtract(1, ordering: .sequentiallyConsistent) }
            return old
        }
    }

    /// The fault to inject into `call` on `name` in the directory at `directory`, after any stall it asks for.
    @inline(__always)
    static func fault(_ call: SystemCall, directory: String, name: String?) -> Int32? {
        guard FileSystemState.shared.faultPlanCount.load(ordering: .relaxed) > 0 else { return nil }
        return slowPath(call, directory: directory, name: name)
    }

    private static func slowPath(_ call: SystemCall, directory: String, name: String?) -> Int32? {
        guard let plan = FileSystemState.shared.faultPlans.withLock({ $0[directory] }) else { return nil }
        switch plan(call, name) {
        case .fail(let code)?:
            return code
        case .stall(let microseconds)?:
            usleep(microseconds)
            return nil
        case nil:
            return nil
        }
    }
}
