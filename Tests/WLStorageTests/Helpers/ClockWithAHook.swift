// A clock for the package that lets a test run work at the moment a thread reads it: between two steps of the package
// that read it, as another thread's work could come there.
import Dispatch
import Foundation

@testable import WLStorage

/// The package's clock, which runs work given to it once, the next time the thread that gave it reads it.
final class ClockWithAHook: WriteScheduler {
    private let hook = Lock<(thread: UInt, work: @Sendable () -> Void)?>(nil)

    var now: UInt64 {
        let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
        hook.withLock { hook -> (@Sendable () -> Void)? in
            guard let taken = hook, taken.thread == thread else { return nil }
            hook = nil
            return taken.work
        }?()
        return DispatchTime.now().uptimeNanoseconds
    }

    func schedule(after delay: UInt64, _ work: @escaping @Sendable () -> Void) {
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay)), execute: work)
    }

    func onNextReading(_ work: @escaping @Sendable () -> Void) {
        let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
        hook.withLock { $0 = (thread, work) }
    }
}
