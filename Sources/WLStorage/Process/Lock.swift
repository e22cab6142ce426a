import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A `Mutex` that ThreadSanitizer can see.
///
/// `Synchronization.Mutex` on Linux locks with atomics and futexes that ThreadSanitizer does not observe, so every
/// access it guards is reported as a race. When the program runs under ThreadSanitizer, each lock carries a small
/// token whose address it hands to `__tsan_acquire` after locking and to `__tsan_release` before unlocking. In any
/// other program the token is `nil` and the lock is the `Mutex` plus one predictable branch.
@usableFromInline
package struct Lock<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>
    @usableFromInline let sanitizer: SanitizerToken?

    // Inlined: in code not specialized for a value type, each call of its own looks up the lock's metadata again.
    @inline(__always)
    package init(_ initialValue: consuming sending Value) {
        self.mutex = Mutex(initialValue)
        self.sanitizer = SanitizerToken.make()
    }

    /// Calls `body` with the value while holding the lock.
    @inlinable
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // Read here, where the lock's generic type is at hand: read inside the closure, the field's place would be
        // found by a look-up of that type, on every call of a generic caller.
        let sanitizer = self.sanitizer
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            guard let sanitizer else { return try body(&value) }
            sanitizer.acquire()
            defer { sanitizer.release() }
            return try body(&value)
        }
    }
}

extension Lock: @unchecked Sendable where Value: ~Copyable {}  // the Mutex guards the value

/// ThreadSanitizer's annotation functions, found at run time: they exist only in programs built with it.
@usableFromInline
final class SanitizerToken: Sendable {
    typealias Hook = @convention(c) (UnsafeRawPointer?) -> Void

    private static let hooks: (acquire: Hook, release: Hook)? = {
        guard let acquire = dlsym(nil, "__tsan_acquire"), let release = dlsym(nil, "__tsan_release") else {
            return nil
        }
        return (unsafeBitCast(acquire, to: Hook.self), unsafeBitCast(release, to: Hook.self))
    }()

    private let acquireHook: Hook
    private let releaseHook: Hook

    private init(_ hooks: (acquire: Hook, release: Hook)) {
        self.acquireHook = hooks.acquire
        self.releaseHook = hooks.release
    }

    /// A new token when the program runs under ThreadSanitizer, else `nil`.
    static func make() -> SanitizerToken? {
        hooks.map(SanitizerToken.init)
    }

    @usableFromInline
    func acquire() {
        acquireHook(Unmanaged.passUnretained(self).toOpaque())
    }

    @usableFromInline
    func release() {
        releaseHook(Unmanaged.passUnretained(self).toOpaque())
    }
}
