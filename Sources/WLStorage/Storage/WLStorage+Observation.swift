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
    /// Pass `nil` to be called without a hop to a queue, on the thread that delivers the change, as
    /// `NotificationCenter` does for an observer with no queue: a thread that sets the storage, before its set
    /// returns, or a thread of the package for a change made elsewhere (the PostgreSQL store's listener, the check
    /// of a file another program replaced). A change then reaches the handler sooner, by the wake-up of a thread.
    /// The handler is called for one change at a time, in the order of the changes, and with no lock of the package
    /// held, so it may read, set or flush the storage, or cancel its subscription or another's. Keep it short: while
    /// it runs, later changes of the key wait, and a thread that set the storage is not back from its set. A change
    /// made while a handler of the storage runs (by another thread, or by the handler itself) is delivered after it,
    /// by the thread that runs it or by a thread of the package, and so may reach the handler after its set returned.
    /// A handler whose subscription is cancelled is not called again, except by a call that another thread was
    /// already starting.
    ///
    /// ```swift
    /// let latest = Mutex(0)
    /// let subscription = $counter.onChange(queue: nil) { value in
    ///     latest.withLock { $0 = value }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - queue: The queue `handler` runs on, or `nil` to run it on the thread that delivers the change.
    ///   - handler: Receives each new value.
    /// - Returns: A subscription. Keep it: the handler is called until it is cancelled or deinitialized.
    public func onChange(
        queue: DispatchQueue?, _ handler: @escaping @Sendable (T) -> Void
    ) -> WLStorageSubscription {
        let cell = self.cell
        let id: UInt64
        if let queue {
            id = cell.addListener(sendingCurrent: false) { value in
                queue.async { handler(value) }
            }
        } else {
            id = cell.addListener(sendingCurrent: false, handler)
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
