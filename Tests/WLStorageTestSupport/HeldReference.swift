import Foundation

/// A reference that a change handler uses or lets go of: a storage, its subscription, its store. The handler takes it
/// out (``take()``) to release it itself, after the lock, as the last reference.
public final class HeldReference<T>: @unchecked Sendable {  // `value` under `lock`
    private let lock = NSLock()
    private var value: T?

    public init(_ value: T? = nil) { self.value = value }

    public var current: T? { lock.withLock { value } }

    public func hold(_ newValue: T?) {
        let old = lock.withLock {
            defer { value = newValue }
            return value
        }
        _ = old
    }

    /// Takes the value out, so that the caller releases it, after the lock.
    public func take() -> T? {
        lock.withLock {
            defer { value = nil }
            return value
        }
    }
}
