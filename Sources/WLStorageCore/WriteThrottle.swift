/// The throttle: the first change after a quiet interval arms a tick with no delay; later changes while armed do
/// nothing (the tick writes the latest). A change after a write arms a tick one interval after that write started; a
/// write disarms, so a stale tick finds its token out of date.
@usableFromInline
package struct WriteThrottle: Sendable {
    /// The flush interval in nanoseconds (the shortest of the cell's storages); `UInt64.max` for no automatic writes.
    // Properties are declared widest first, which keeps the layout at 24 bytes.
    @usableFromInline package private(set) var interval: UInt64
    /// When the last write started; 0 before the first.
    private var lastWriteStart: UInt64 = 0
    package private(set) var token: UInt32 = 0
    /// Failed writes since the last one that succeeded, up to 65,535 (the backoff stops growing after 32).
    package private(set) var failures: UInt16 = 0
    /// Every storage was released with work left: ticks and retries wait no interval, even with automatic writes off.
    package private(set) var isUrgent = false
    package private(set) var isArmed = false

    package static let minimumRetryDelay: UInt64 = 100_000_000
    package static let maximumRetryDelay: UInt64 = 30_000_000_000

    /// The longest interval, 100 years in nanoseconds: longer ones are clamped, so clock arithmetic never overflows.
    package static let maximumInterval: UInt64 = 100 * 365 * 24 * 3_600 * 1_000_000_000

    package init(interval: UInt64?) { self.interval = Self.clamped(interval) }

    private static func clamped(_ interval: UInt64?) -> UInt64 {
        interval.map { min($0, Self.maximumInterval) } ?? .max
    }

    /// Lowers the interval to `interval` when shorter; returns whether it did. An armed tick keeps its time.
    package mutating func lower(to interval: UInt64?) -> Bool {
        let new = Self.clamped(interval)
        guard new < self.interval else { return false }
        self.interval = new
        return true
    }

    /// Makes the writes urgent (see ``isUrgent``), disarming a tick armed for later: the caller arms a new one.
    package mutating func makeUrgent() {
        isUrgent = true
        disarm()
    }

    package mutating func endUrgency() {
        isUrgent = false
    }

    /// The interval the delays are computed from: none when urgent or when automatic writes are off.
    private var waitingInterval: UInt64 { isUrgent || interval == .max ? 0 : interval }

    /// Whether ticks write changes: the throttle has an interval, or a release made it urgent.
    package var writesOnTicks: Bool { interval != .max || isUrgent }
    /// Whether a change must arm a tick: automatic writes are on and none is armed.
    @usableFromInline
    package var needsTick: Bool { !isArmed && interval != .max }

    /// Arms a tick, unless one is armed or automatic writes are off (unless `force`), and returns its token and delay.
    package mutating func arm(now: UInt64, force: Bool = false) -> (token: UInt32, delay: UInt64)? {
        guard interval != .max || force || isUrgent, !isArmed else { return nil }
        isArmed = true
        token &+= 1
        guard lastWriteStart != 0 else { return (token, 0) }
        let wait =
            failures == 0
            ? waitingInterval : Self.retryDelay(afterFailures: UInt32(failures), interval: waitingInterval)
        let due = lastWriteStart.addingReportingOverflow(wait)
        // An interval long enough to overflow the clock means "much later", never "now".
        guard !due.overflow else { return (token, .max - now) }
        guard due.partialValue > now else { return (token, 0) }
        return (token, due.partialValue - now)
    }

    /// The wait before a retry after `failures` in a row: the interval (at least 100 ms), doubling up to 30 s or it.
    package static func retryDelay(afterFailures failures: UInt32, interval: UInt64) -> UInt64 {
        let base = max(interval, minimumRetryDelay)
        let ceiling = max(base, maximumRetryDelay)
        let doublings = min(max(failures, 1) - 1, 32)
        let (delay, overflow) = base.multipliedReportingOverflow(by: 1 << doublings)
        return overflow ? ceiling : min(delay, ceiling)
    }

    package mutating func writeStarts(now: UInt64) {
        disarm()
        lastWriteStart = max(now, 1)
    }

    /// Disarms any tick: it will find its token out of date.
    package mutating func disarm() {
        isArmed = false
        token &+= 1
    }

    /// How the last write ended, for the delay of the next retry.
    package mutating func writeEnded(succeeded: Bool) {
        failures = succeeded ? 0 : (failures == .max ? failures : failures + 1)
    }
}
