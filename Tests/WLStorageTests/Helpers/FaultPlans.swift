import Foundation
import Synchronization

@testable import WLStorage
@testable import WLStorageFiles

/// One system call that a storage directory asked the fault plan about.
struct RecordedCall: Sendable, Equatable, CustomStringConvertible {
    let call: SystemCall
    /// The entry the call is on: `nil` for the directory itself.
    let name: String?
    /// The name of the storage's file, to tell it from a temporary file.
    let fileName: String

    /// What the call is on: `directory`, `temporary` (a writer's temporary file), `file` (the storage's file), or
    /// the entry's name.
    var target: String {
        guard let name else { return "directory" }
        if name == fileName { return "file" }
        if StorageDirectory.isTemporary(name) { return "temporary" }
        return name
    }

    /// The call and what it is on, such as `fsync(directory)` or `rename(file)`.
    var description: String { "\(call.rawValue)(\(target))" }
}

/// A fault plan for one storage directory that sees only the system calls made on the thread that installed it.
///
/// The monitor's thread and the scheduler's queue read the same directory when they notice a write; counting only
/// the test's own calls makes "the Nth call" the same call in every run. A storage whose flush interval is `nil`
/// and whose scheduler is a ``ManualScheduler`` makes every read and write of its cell on the thread that calls
/// `flush()`, so that thread is the one to install the plan on.
///
/// The plan records every call it is asked about, in order, and fails the call at index `failing` (counted from 0,
/// among the recorded calls) with `fault`. `standing` is asked first about every call: a fault it returns is
/// injected every time, and the call is neither recorded nor counted (for example, `renameat2` unsupported).
final class FaultPlan: Sendable {
    private struct State {
        var calls: [RecordedCall] = []
        var injected: RecordedCall?
    }

    let path: String
    private let fileName: String
    private let thread: pthread_t
    private let failing: Int?
    private let fault: InjectedFault
    private let standing: @Sendable (SystemCall, String?) -> InjectedFault?
    private let state = Lock(State())

    /// Installs the plan for `directory`, replacing any other plan of that directory.
    init(
        directory: URL, fileName: String, failing: Int? = nil, with fault: InjectedFault = .fail(EIO),
        standing: @escaping @Sendable (SystemCall, String?) -> InjectedFault? = { _, _ in nil }
    ) {
        self.path = directory.standardizedFileURL.path
        self.fileName = fileName
        self.thread = pthread_self()
        self.failing = failing
        self.fault = fault
        self.standing = standing
        FaultInjection.install({ [self] call, name in decide(call, name) }, forDirectory: path)
    }

    /// Removes the plan: the directory's calls run unharmed from now on. The plan keeps what it recorded.
    func remove() {
        FaultInjection.remove(forDirectory: path)
    }

    /// Every call recorded so far, in order.
    var calls: [RecordedCall] { state.withLock { $0.calls } }

    /// The call that was failed with `fault`, once it was made.
    var injected: RecordedCall? { state.withLock { $0.injected } }

    private func decide(_ call: SystemCall, _ name: String?) -> InjectedFault? {
        guard pthread_equal(pthread_self(), thread) != 0 else { return nil }
        // Parents are synced once per process, by whichever test uses them first: not counted, so that "the Nth
        // call" is the same call in every run.
        guard name != ".." else { return nil }
        if let fault = standing(call, name) { return fault }
        return state.withLock { state in
            let recorded = RecordedCall(call: call, name: name, fileName: fileName)
            state.calls.append(recorded)
            guard state.calls.count - 1 == failing else { return nil }
            state.injected = recorded
            return fault
        }
    }
}

/// Runs `body` with a fault plan installed for `directory`, and removes it when `body` returns.
func withFaultPlan<R>(
    in directory: URL, fileName: String, failing: Int? = nil, with fault: InjectedFault = .fail(EIO),
    standing: @escaping @Sendable (SystemCall, String?) -> InjectedFault? = { _, _ in nil },
    _ body: (FaultPlan) throws -> R
) rethrows -> R {
    let plan = FaultPlan(directory: directory, fileName: fileName, failing: failing, with: fault, standing: standing)
    defer { plan.remove() }
    return try body(plan)
}

/// The names in `directory` that are temporary files of the package's writers (`NAME~…tmp`), or the files of
/// conditional replacements' exchanges (`NAME~…xchg`).
func temporaryFiles(in directory: URL) -> [String] {
    entries(of: directory).filter { $0.contains("~") && ($0.hasSuffix(".tmp") || $0.hasSuffix(".xchg")) }
}

/// The bytes of the file `name` in `directory`, or `nil` when there is none.
func contents(of name: String, in directory: URL) -> Data? {
    FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
}

/// A storage of `key` in `directory` with the default backer whose ticks run only when `scheduler` is advanced:
/// with a `nil` flush interval, every read and write of its cell runs on the thread that creates it or flushes it.
func manualStorage<T: Codable & Sendable>(
    _ key: String, in directory: URL, default value: T, scheduler: ManualScheduler = ManualScheduler()
) -> WLStorage<T> {
    ReportedErrors.install()
    return WLStorage(
        defaultValueClosure: { value }, flushInterval: nil,
        backer: WLStorageDefaultBacker<T>(key: key, directory: directory), scheduler: scheduler)
}

/// A name for an `errno` value, for test descriptions.
func errnoName(_ code: Int32) -> String {
    switch code {
    case EIO: "EIO"
    case EMFILE: "EMFILE"
    case ENOSPC: "ENOSPC"
    case EINTR: "EINTR"
    case EINVAL: "EINVAL"
    default: "errno \(code)"
    }
}
