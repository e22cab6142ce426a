import Foundation

/// A value guarded by a lock that ThreadSanitizer sees (a pthread mutex, through `NSLock`). The store's locks are
/// taken around network calls and bookkeeping, never on a storage's hot path.
final class Locked<Value>: @unchecked Sendable {  // `value`: under `lock`
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Calls `body` with the value while holding the lock.
    func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
