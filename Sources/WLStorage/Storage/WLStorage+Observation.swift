import Dispatch
import Observation
import Synchronization

/// A storage is observable: `withObservationTracking` sees reads of ``WLStorage/wrappedValue``, and its
/// `onChange` fires when the value changes, whichever thread or program changed it.
///
/// ```swift
/// withObservationTracking {
///     render(settings.wrappedValue)
/// } onChange: {
///     scheduleRedraw()
/// }
/// ```
extension WLStorage: Observable {}

extension WLStorage {
    /// The value now, then every change, as an async sequence.
    ///
    /// A consumer slower than the changes gets the latest value, not a backlog. The sequence ends when the
    /// consumer's task is cancelled, and nothing is left registered after it.
    ///
    /// ```swift
    /// for await settings in $settings.values {
    ///     apply(settings)
    /// }
    /// ```
    public var values: AsyncStream<T> {
        let cell = self.cell
        return AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let id = cell.addListener(sendingCurrent: true) { continuation.yield($0) }
            continuation.onTermination = { _ in cell.removeListener(id) }
        }
    }

    /// Calls `handler` on `queue` with the new value after every change, from this process or another.
    ///
    /// Changes are delivered in order when `queue` is serial. Pass `.main` to be called on the main thread, as the
    /// reference library's SwiftUI updates are; the main queue runs only while the program runs `dispatchMain()`
    /// or a run loop.
    ///
    /// - Parameters:
    ///   - queue: The queue `handler` runs on.
    ///   - handler: Receives each new value.
    /// - Returns: A subscription. Keep it: the handler is called until it is cancelled or deinitialized.
    public func onChange(
        queue: DispatchQueue, _ handler: @escaping @Sendable (T) -> Void
    ) -> WLStorageSubscription {
        let cell = self.cell
        let id = cell.addListener(sendingCurrent: false) { value in
            queue.async { handler(value) }
        }
        return WLStorageSubscription(cancel: { cell.removeListener(id) })
    }
}

/// Something that runs until it is cancelled or released: a change handler registered with
/// ``WLStorage/onChange(queue:_:)``, or a store's feed of changes (``WLStorageStore/observeChanges(_:)``).
public final class WLStorageSubscription: Sendable {
    /// What stops it, until it is called: taken out under the lock, and called and released after it. The handler it
    /// releases may hold the last reference to a storage, whose deinit flushes.
    private let cancellation: Lock<(@Sendable () -> Void)?>

    /// Creates a subscription that calls `cancel` once, when it is cancelled or released.
    public init(cancel: @escaping @Sendable () -> Void) {
        self.cancellation = Lock(cancel)
    }

    /// Stops it. For a change handler, calls already queued may still run. Calling it again does nothing.
    public func cancel() {
        let cancellation = self.cancellation.withLock { body in
            defer { body = nil }
            return body
        }
        cancellation?()
    }

    deinit {
        cancel()
    }
}
