import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A `Mutex` that ThreadSanitizer can see.
///
/// `Synchronization.Mutex` on Linux uses atomics and futexes that ThreadSanitizer does not observe. Under
/// ThreadSanitizer the lock calls `__tsan_acquire` after locking and `__tsan_release` before unlocking; otherwise it is
/// the `Mutex` plus one predictable branch. It holds the `Mutex` alone, so that unspecialized code reaches it without
/// looking up the lock's type.
@usableFromInline
package struct Lock<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>

    // Inlined, as is `withLock`, so that unspecialized code looks up no metadata per call.
    @inline(__always)
    package init(_ initialValue: consuming sending Value) {
        self.mutex = Mutex(initialValue)
    }

    /// Calls `body` with the value while holding the lock.
    @inlinable @inline(__always)
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try withLock(hooks: SanitizerHooks.active, body)
    }

    /// Calls `body` with the value while holding the lock, with ThreadSanitizer's `hooks` looked up beforehand: a
    /// hot path keeps them at hand, where the shared ones cost a call into this module at every use.
    @inlinable @inline(__always)
    package func withLock<Result: ~Copyable, E: Error>(
        hooks: SanitizerHooks?, _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        guard let hooks else { return try mutex.withLock(body) }
        // The mutex's place stands for the lock: it does not move while the lock is in use, and it is found without an
        // access to the value, which the sanitizer would see before the lock's acquisition.
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
    @usableFromInline static let active: SanitizerHooks? = {
        guard let acquire = dlsym(nil, "__tsan_acquire"), let release = dlsym(nil, "__tsan_release") else {
            return nil
        }
        return SanitizerHooks(
            acquire: unsafeBitCast(acquire, to: Hook.self), release: unsafeBitCast(release, to: Hook.self))
    }()
}
