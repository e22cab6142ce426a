import Foundation
import Testing
import WLStorage

/// Where the tests of the `.capturingOutput` suites run: threads of their own, a few tests at a time.
///
/// Swift Testing runs tests as tasks, and a synchronous test (or one waiting on a child process, a server or a poll)
/// holds a thread of the concurrency pool while it waits. The pool has as many threads as the machine has cores, so on
/// two cores two such tests ran at a time, most of the suite's time was spent waiting, and a task a test started could
/// not run until another test ended. A test run with this executor as its preference leaves the pool to the tasks the
/// tests start, and ``TestGate`` bounds how many run at once, so the machine is not swamped either. A test's time
/// limit (`.timeLimit`) counts from before its turn: a limit must allow for the wait.
public final class TestThreadsExecutor: TaskExecutor, @unchecked Sendable {
    public static let shared = TestThreadsExecutor()

    /// Jobs waiting for a thread, and how many threads wait for a job; both under `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var idle = 0

    /// Runs `job` on an idle thread, or on a new one when every thread is busy: a job never waits for another to end.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        let needsThread = jobs.count > idle
        if !needsThread { condition.signal() }
        condition.unlock()
        if needsThread {
            let thread = Thread { self.work() }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    private func work() {
        condition.lock()
        while true {
            while jobs.isEmpty {
                idle += 1
                condition.wait()
                idle -= 1
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
            condition.lock()
        }
    }
}

/// How many tests run at once on ``TestThreadsExecutor``: a test waits for its turn without holding a thread.
public final class TestGate: Sendable {
    /// `WLSTORAGE_TEST_WIDTH`, or two tests per core: most of a test's time is spent waiting, and more at once slowed
    /// the tests that time what they wait for (under ThreadSanitizer, four per core did).
    public static let shared = TestGate(
        width: ProcessInfo.processInfo.environment["WLSTORAGE_TEST_WIDTH"].flatMap(Int.init)
            ?? 2 * ProcessInfo.processInfo.activeProcessorCount)

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Lock<State>

    init(width: Int) { state = Lock(State(free: max(width, 1))) }

    /// Runs `body` once fewer than the gate's width of tests are running.
    public func run(_ body: () async throws -> Void) async rethrows {
        await withCheckedContinuation { (turn: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                guard state.free > 0 else {
                    state.waiting.append(turn)
                    return false
                }
                state.free -= 1
                return true
            }
            if now { turn.resume() }
        }
        defer {
            let next = state.withLock { state in
                guard !state.waiting.isEmpty else {
                    state.free += 1
                    return nil as CheckedContinuation<Void, Never>?
                }
                return state.waiting.removeFirst()
            }
            next?.resume()
        }
        try await body()
    }
}

/// Runs each test of a suite on ``TestThreadsExecutor`` once ``TestGate`` lets it: every suite carries it, most through
/// `.capturingOutput`.
public struct TestThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public init() {}

    public var isRecursive: Bool { true }

    /// Each case of a test runs in its turn; a suite, or a parameterized test as a whole, takes no turn.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await TestGate.shared.run {
            try await withTaskExecutorPreference(TestThreadsExecutor.shared) { try await function() }
        }
    }
}

public extension Trait where Self == TestThreadsTrait {
    /// The suite's tests run on threads of their own, a few at a time (see ``TestThreadsExecutor``).
    static var onTestThreads: Self { Self() }
}

/// Whether the tests run under ThreadSanitizer, whose runtime defines `__tsan_init`.
public let isUnderThreadSanitizer: Bool = {
    guard let program = dlopen(nil, RTLD_NOW) else { return false }
    return dlsym(program, "__tsan_init") != nil
}()
