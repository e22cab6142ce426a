import Foundation

/// A value guarded by an `NSLock`, which ThreadSanitizer sees; taken around network calls, never on a hot path.
final class Locked<Value>: @unchecked Sendable {  // `guarded`: under `lock`
    private let lock = NSLock()
    private var guarded: Value

    init(_ value: Value) { self.guarded = value }

    func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&guarded)
    }

    /// The value, read or replaced under the lock: a get then a set are two steps.
    var value: Value {
        get { withLock { $0 } }
        set { withLock { $0 = newValue } }
    }
}
