import Dispatch

/// Where the package gets the time and runs delayed work. Injected so that tests of the throttle need no sleep.
package protocol WriteScheduler: AnyObject, Sendable {
    /// Monotonic time in nanoseconds.
    var now: UInt64 { get }

    /// Runs `work` off the caller's thread, `delay` nanoseconds from now (as soon as possible for 0).
    func schedule(after delay: UInt64, _ work: @escaping @Sendable () -> Void)
}

/// The scheduler outside tests: the monotonic clock and one shared concurrent queue (a cell keeps its jobs serial).
/// Work due 200 ms or more ahead is gathered in 20 ms slots, one timer per slot; a due slot runs its first piece on
/// the timer's thread and hands the rest to the queue, so a slow backer holds up no other storage.
package final class DispatchWriteScheduler: WriteScheduler {

    private let queue = DispatchQueue(label: "WLStorage.disk", qos: .utility, attributes: .concurrent)
    /// Work waiting for its slot, by the slot's due time.
    private let slots = Lock<[UInt64: [@Sendable () -> Void]]>([:])

    static let slotWidth: UInt64 = 20_000_000
    static let gatheringThreshold: UInt64 = 200_000_000

    package var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    package func schedule(after delay: UInt64, _ work: @escaping @Sendable () -> Void) {
        if delay == 0 {
            queue.async(execute: work)
            return
        }
        let (due, overflow) = now.addingReportingOverflow(delay)
        guard delay >= Self.gatheringThreshold, !overflow, due <= UInt64.max - Self.slotWidth else {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay)), execute: work)
            return
        }
        let slot = (due / Self.slotWidth + 1) * Self.slotWidth
        let isNew = slots.withLock { slots in
            slots[slot, default: []].append(work)
            return slots[slot]?.count == 1
        }
        guard isNew else { return }
        queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: slot)) { [self] in
            let works = slots.withLock { $0.removeValue(forKey: slot) } ?? []
            for work in works.dropFirst() { queue.async(execute: work) }
            works.first?()
        }
    }
}
