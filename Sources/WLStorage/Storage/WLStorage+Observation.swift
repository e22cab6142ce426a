import Dispatch
import Observation

/// A storage is observable: `withObservationTracking` sees reads of ``WLStorage/wrappedValue``, and its
/// `onChange` fires when the value changes, whichever thread or program changed it.
extension WLStorage: Observable {}

extension WLStorage {
    /// The value now, then every change, as an async sequence.
    ///
    /// A slow consumer gets the latest value, not a backlog. The sequence ends when the consumer's task is cancelled.
    public var values: AsyncStream<T> {
        let cell = self.cell
        return AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let id = cell.addListener(sendingCurrent: true) { continuation.yield($0) }
            continuation.onTermination = { _ in cell.removeListener(id) }
        }
    }

    /// Calls `handler` on `queue` with the new value after every change, from this process or another.
    ///
    /// Changes are delivered in order when `queue` is serial. With `nil`, the handler runs on the thread that delivers
    /// the change (a setter, or a thread of the package), one change at a time, with no lock of the package held; keep
    /// it short. A cancelled handler is not called again, except by a call already starting.
    ///
    /// - Parameters:
    ///   - queue: The queue `handler` runs on, or `nil` to run it on the thread that delivers the change.
    ///   - handler: Receives each new value.
    /// - Returns: A subscription. Keep it: the handler is called until it is cancelled or deinitialized.
    public func onChange(queue: DispatchQueue?, _ handler: @escaping @Sendable (T) -> Void) -> WLStorageSubscription {
        let cell = self.cell
        let id = cell.addListener(sendingCurrent: false) { value in
            if let queue { queue.async { handler(value) } } else { handler(value) }
        }
        return WLStorageSubscription(cancel: { cell.removeListener(id) })
    }
}
