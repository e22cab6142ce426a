import Foundation

/// Runs `body` on a thread of its own; returns whether it finished within `seconds`. A body that hangs is left
/// hanging, and the test fails instead of the suite.
public func finishes(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        body()
        done.signal()
    }
    return done.wait(timeout: .now() + seconds) == .success
}
