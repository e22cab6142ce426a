import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A `Mutex` that ThreadSanitizer can see.
///
/// `Synchronization.Mutex` on Linux locks with atomics and futexes that ThreadSanitizer does not observe, so every
/// access it guards is reported as a race. When the program runs under ThreadSanitizer, the lock hands the address of
/// its mutex to `__tsan_acquire` after locking and to `__tsan_release` before unlocking. In any other program the lock
/// is the `Mutex` plus one predictable branch.
///
/// The lock holds the `Mutex` alone, so that the value's place in it is the same whatever the lock is: code not
/// specialized for the value's type (a cell's, generic in the program's own type) then reaches the mutex without
/// looking up the lock's metadata at run time.
@usableFromInline
package struct Lock<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>

    // Inlined: in code not specialized for a value type, each call of its own looks up the lock's metadata again.
    @inline(__always)
    package init(_ initialValue: consuming sending Value) {
        self.mutex = Mutex(initialValue)
    }

    /// Calls `body` with the value while holding the lock.
    ///
    /// Always inlined: in code not specialized for the value's type, a call of its own would look up the metadata of
    /// the lock's type at every call.
    @inlinable @inline(__always)
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // One test of whether a sanitizer watches; without one, `body` goes to the mutex as it is.
        guard let hooks = SanitizerHooks.active else { return try mutex.withLock(body) }
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
struct SanitizerHooks: Sendable {
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
