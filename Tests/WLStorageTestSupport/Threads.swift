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

/// Starts `body` on a thread of its own and returns a group left when it ends. A test's background work runs here
/// rather than on Dispatch's shared threads: on Linux their number grows only slowly past the number of cores, and
/// a loop holding one of them delays the storages' own work in every test running at the same time.
@discardableResult
public func startThread(_ body: @escaping @Sendable () -> Void) -> DispatchGroup {
    let group = DispatchGroup()
    group.enter()
    Thread.detachNewThread {
        body()
        group.leave()
    }
    return group
}
