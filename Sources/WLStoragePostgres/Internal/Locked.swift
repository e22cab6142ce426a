import Foundation

/// A value guarded by an `NSLock`, which ThreadSanitizer sees; taken around network calls, never on a hot path.
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
