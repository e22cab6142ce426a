import Dispatch

/// A flush waiting for the job in flight to end.
final class WaitingFlush: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func wait() { semaphore.wait() }
    func wake() { semaphore.signal() }
}
