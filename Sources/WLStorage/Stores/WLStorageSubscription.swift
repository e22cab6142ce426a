/// Something that runs until it is cancelled or released: a change handler registered with
/// ``WLStorage/onChange(queue:_:)``, or a store's feed of changes (``WLStorageStore/observeChanges(_:)``).
public final class WLStorageSubscription: Sendable {
    /// Taken out under the lock, called and released after it: it may hold a storage's last reference.
    private let cancellation: Lock<(@Sendable () -> Void)?>

    /// Creates a subscription that calls `cancel` once, when it is cancelled or released.
    public init(cancel: @escaping @Sendable () -> Void) { self.cancellation = Lock(cancel) }

    /// Stops it. For a change handler, calls already queued may still run. Calling it again does nothing.
    public func cancel() { cancellation.withLock { $0.take() }?() }

    deinit { cancel() }
}
