import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// MARK: Keeping work alive

/// Consumes a value so that the optimizer cannot delete the work that produced it.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Returns its argument through a call the optimizer cannot see into, so that no fact about it is known.
@inline(never)
func opaque<T>(_ value: T) -> T {
    value
}

// MARK: Time and memory

/// Monotonic time in nanoseconds. The corresponding C function is `clock_gettime(CLOCK_MONOTONIC)`.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
}

/// Bytes the C heap holds for live allocations, in every arena, counting large blocks served by `mmap`.
///
/// glibc's `mallinfo2()` (`uordblks + hblkhd`). `<malloc.h>` is not part of the `Glibc` module, so the
/// function is found with `dlsym`. It returns a struct of ten `size_t`, which both the x86-64 and the AArch64
/// C calling conventions return through memory the caller provides; it is called as a function returning
/// `rusage`, a larger struct of `long`s, so that the caller provides enough memory in the same way, and the
/// fields are read at their offsets in `struct mallinfo2`.
enum HeapUsage {
    private typealias Mallinfo2 = @convention(c) () -> rusage

    private static let mallinfo2: Mallinfo2? = {
        guard MemoryLayout<rusage>.size >= 10 * MemoryLayout<Int>.size,
            let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallinfo2")
        else { return nil }
        return unsafeBitCast(symbol, to: Mallinfo2.self)
    }()

    /// Whether `mallinfo2` is there and sees a 1 MB allocation.
    static let isAvailable: Bool = {
        guard mallinfo2 != nil else { return false }
        let before = bytesInUse()
        let probe = [UInt8](repeating: 1, count: 1 << 20)
        let after = bytesInUse()
        blackHole(probe)
        return after - before >= 1 << 20
    }()

    /// Bytes in use, or 0 when `mallinfo2` is unavailable.
    static func bytesInUse() -> Int {
        guard let mallinfo2 else { return 0 }
        var info = mallinfo2()
        return withUnsafeBytes(of: &info) { bytes in
            let word = MemoryLayout<Int>.size
            let hblkhd = bytes.load(fromByteOffset: 4 * word, as: Int.self)
            let uordblks = bytes.load(fromByteOffset: 7 * word, as: Int.self)
            return uordblks + hblkhd
        }
    }
}

/// The CPU time, user and system, that every thread of the process has used so far, in nanoseconds.
///
/// The corresponding C function is `getrusage(RUSAGE_SELF)`. Linux apportions the total between user and system time
/// by sampling, so the split of a short window is unreliable (a window can show no user time at all), but it scales
/// both to the precise total, so their sum is exact to the microsecond.
func processCPUNanoseconds() -> UInt64 {
    var usage = rusage()
    precondition(getrusage(RUSAGE_SELF.rawValue, &usage) == 0, "getrusage failed: errno \(errno)")
    func nanoseconds(_ time: timeval) -> UInt64 {
        UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_usec) &* 1_000
    }
    return nanoseconds(usage.ru_utime) + nanoseconds(usage.ru_stime)
}

/// Sleeps for `nanoseconds` of monotonic time, however often a signal interrupts the sleep.
func sleep(nanoseconds: UInt64) {
    sleep(until: monotonicNanoseconds() + nanoseconds)
}

/// Sleeps until the monotonic clock reads `deadline` (in nanoseconds). The corresponding C function is
/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`.
func sleep(until deadline: UInt64) {
    var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &time, nil) == EINTR {}
}

/// A thread of its own that calls a body every `period` nanoseconds of the monotonic clock, with the number of the
/// call, until ``stop()``. The schedule is absolute: a late call does not delay the ones after it.
final class PeriodicThread: Sendable {
    private final class Context: Sendable {
        let period: UInt64
        let body: @Sendable (Int) -> Void
        let stopped = Atomic<Bool>(false)

        init(period: UInt64, body: @escaping @Sendable (Int) -> Void) {
            self.period = period
            self.body = body
        }
    }

    private let context: Context
    private let thread: pthread_t

    init(period: UInt64, _ body: @escaping @Sendable (_ tick: Int) -> Void) {
        context = Context(period: period, body: body)
        var thread = pthread_t()
        let argument = Unmanaged.passRetained(context).toOpaque()
        let result = pthread_create(
            &thread, nil,
            { argument in
                let context = Unmanaged<Context>.fromOpaque(argument!).takeRetainedValue()
                var deadline = monotonicNanoseconds()
                var tick = 0
                while !context.stopped.load(ordering: .relaxed) {
                    context.body(tick)
                    tick += 1
                    deadline += context.period
                    sleep(until: deadline)
                }
                return nil
            }, argument)
        precondition(result == 0, "pthread_create failed: \(result)")
        self.thread = thread
    }

    /// Stops the calls and returns when the thread has ended.
    func stop() {
        context.stopped.store(true, ordering: .relaxed)
        pthread_join(thread, nil)
    }
}

// MARK: Statistics

/// The spread of one quantity over the measured rounds.
struct Stats: Encodable {
    /// The unit of `median`, `min` and `max`: `"ns"` per operation, `"B"`, or `"count"`.
    var unit: String
    var median: Double
    var min: Double
    var max: Double
    /// Every measured round, in the order measured.
    var samples: [Double]
    /// Identifies the ``Harness/measure(_:settings:)`` call that took the samples: the samples of two quantities
    /// with the same measurement were taken round by round side by side.
    var measurement: Int?

    init(unit: String, samples: [Double], measurement: Int? = nil) {
        precondition(!samples.isEmpty)
        self.unit = unit
        self.samples = samples
        self.measurement = measurement
        let sorted = samples.sorted()
        let middle = sorted.count / 2
        self.median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        self.min = sorted.first!
        self.max = sorted.last!
    }

    /// A quantity measured once.
    init(unit: String, single value: Double) {
        self.init(unit: unit, samples: [value])
    }

    /// `self` over `baseline`: the median of the round-by-round ratios when both were measured side by side, which
    /// cancels the machine's drift between rounds; otherwise the ratio of the medians.
    func ratio(to baseline: Stats) -> Double {
        guard let measurement, measurement == baseline.measurement, samples.count == baseline.samples.count else {
            return median / baseline.median
        }
        return Stats(unit: "", samples: zip(samples, baseline.samples).map { $0 / $1 }).median
    }
}

/// Numbers the calls of ``Harness/measure(_:settings:)``, and other measurements whose quantities are taken side
/// by side (``newMeasurement()``).
private let measurements = Atomic<Int>(0)

/// A new measurement number, for quantities that a case measures round by round side by side itself.
func newMeasurement() -> Int {
    measurements.add(1, ordering: .relaxed).newValue
}

// MARK: Running variants

/// One thing to time: a body that performs `n` operations.
struct Variant {
    var name: String
    /// Performs `n` operations and returns the nanoseconds they took.
    var run: (_ n: Int) -> UInt64

    /// A variant timed by the harness around the whole body.
    init(_ name: String, _ body: @escaping (_ n: Int) -> Void) {
        self.name = name
        self.run = { n in
            let start = monotonicNanoseconds()
            body(n)
            return monotonicNanoseconds() - start
        }
    }

    /// A variant that times itself, for bodies with set-up or tear-down that must not be counted.
    init(name: String, timing: @escaping (_ n: Int) -> UInt64) {
        self.name = name
        self.run = timing
    }
}

/// How long and how often to measure.
struct RunSettings {
    /// Measured rounds per variant.
    var rounds: Int
    /// Rounds run and discarded after calibration.
    var warmUpRounds: Int
    /// The time one round should take; the number of operations per round is calibrated to it.
    var roundNanoseconds: UInt64
    /// The most operations in one round.
    var maximumOperations: Int
}

/// Times variants against each other in one process.
///
/// Each variant is first calibrated: the number of operations per round grows until a round takes the
/// configured time. After the warm-up rounds, the measured rounds of all variants are interleaved, in an order
/// that rotates each round, so that drift in the machine's speed affects every variant alike.
struct Harness {
    var quick: Bool
    /// With `--side`: the one side a case with sides (`daemon`) runs, for profiling it alone.
    var side: String?

    /// Settings for operations that take nanoseconds to microseconds.
    var fast: RunSettings {
        quick
            ? RunSettings(rounds: 5, warmUpRounds: 1, roundNanoseconds: 2_000_000, maximumOperations: 1 << 24)
            : RunSettings(rounds: 21, warmUpRounds: 3, roundNanoseconds: 20_000_000, maximumOperations: 1 << 28)
    }

    /// Settings for operations that reach the disk and take a millisecond or more: one operation per round, so
    /// that the variants alternate operation by operation and share whatever the disk is doing.
    var disk: RunSettings {
        quick
            ? RunSettings(rounds: 7, warmUpRounds: 1, roundNanoseconds: 0, maximumOperations: 1)
            : RunSettings(rounds: 61, warmUpRounds: 3, roundNanoseconds: 0, maximumOperations: 1)
    }

    /// Nanoseconds per operation of each variant, by name.
    func measure(_ variants: [Variant], settings: RunSettings) -> [String: Stats] {
        var operations: [Int] = []
        for variant in variants {
            let n = calibrate(variant, settings: settings)
            for _ in 0..<settings.warmUpRounds { _ = variant.run(n) }
            operations.append(n)
        }
        var samples = Array(repeating: [Double](), count: variants.count)
        for round in 0..<settings.rounds {
            for step in 0..<variants.count {
                let index = (round + step) % variants.count
                let elapsed = variants[index].run(operations[index])
                samples[index].append(Double(elapsed) / Double(operations[index]))
            }
        }
        let measurement = newMeasurement()
        var result: [String: Stats] = [:]
        for (index, variant) in variants.enumerated() {
            result[variant.name] = Stats(unit: "ns", samples: samples[index], measurement: measurement)
        }
        return result
    }

    /// The number of operations for which one round of `variant` takes about the round time.
    private func calibrate(_ variant: Variant, settings: RunSettings) -> Int {
        var n = 1
        while true {
            let elapsed = variant.run(n)
            if elapsed >= settings.roundNanoseconds || n >= settings.maximumOperations { return n }
            let scale = elapsed == 0 ? 100 : Double(settings.roundNanoseconds) / Double(elapsed) * 1.1
            let next = Int(Double(n) * Swift.min(100, Swift.max(2, scale)))
            n = Swift.min(settings.maximumOperations, next)
            if elapsed * 2 > settings.roundNanoseconds {
                // Close enough: one more run at the scaled count is the last calibration step.
                return n
            }
        }
    }
}

// MARK: Temporary directories

/// Makes a fresh private directory under the system's temporary directory, runs `body` with it, and removes it.
///
/// Storages made in `body` must be gone when it returns, so that their last flush does not write into a
/// directory being removed.
func withTemporaryDirectory<R>(_ label: String, _ body: (URL) throws -> R) rethrows -> R {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/wlstorage-bench-\(label)-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String in
        guard let made = mkdtemp(buffer.baseAddress!) else {
            fatalError("cannot create a temporary directory in \(base): errno \(errno)")
        }
        return String(cString: made)
    }
    let url = URL(fileURLWithPath: path, isDirectory: true)
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url)
}
