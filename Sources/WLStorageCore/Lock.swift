import Foundation
import Synchronization

/// A `Mutex` that ThreadSanitizer can see (TSan does not observe `Mutex`'s futex on Linux).
@usableFromInline
package struct Lock<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>

    @inlinable @inline(__always)
    package init(_ initialValue: consuming sending Value) { self.mutex = Mutex(initialValue) }

    @inlinable @inline(__always)
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try withLock(hooks: SanitizerHooks.active, body)
    }

    /// Calls `body` with the value while holding the lock, with the sanitizer `hooks` looked up by the caller.
    @inlinable @inline(__always)
    package func withLock<Result: ~Copyable, E: Error>(
        hooks: SanitizerHooks?, _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        guard let hooks else { return try mutex.withLock(body) }
        // The mutex's address stands for the lock: stable while in use, and found without touching the value.
        let token = withUnsafePointer(to: mutex) { UnsafeRawPointer($0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            hooks.acquire(token)
            defer { hooks.release(token) }
            return try body(&value)
        }
    }
}

extension Lock: @unchecked Sendable where Value: ~Copyable {}  // the Mutex guards the value

/// ThreadSanitizer's annotation functions, found at run time: they exist only in programs built with it.
@usableFromInline
package struct SanitizerHooks: Sendable {
    @usableFromInline typealias Hook = @convention(c) (UnsafeRawPointer?) -> Void

    @usableFromInline let acquire: Hook
    @usableFromInline let release: Hook

    /// The hooks when the program runs under ThreadSanitizer, else `nil`.
    @usableFromInline package static let active: SanitizerHooks? = {
        guard let acquire = dlsym(nil, "__tsan_acquire"), let release = dlsym(nil, "__tsan_release") else { return nil }
        return SanitizerHooks(
            acquire: unsafeBitCast(acquire, to: Hook.self), release: unsafeBitCast(release, to: Hook.self))
    }()
}
