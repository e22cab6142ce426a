/// The program's keys, declared as constants in extensions (see ``WLStorageKey``), and one-shot access to them.
///
/// ```swift
/// extension WLStorageKeys {
///     static let launches = WLStorageKey<Int>("launches", default: 0)
/// }
///
/// WLStorageKeys[.launches] += 1                      // a get and a set
/// WLStorageKeys.update(.launches) { $0 += 1 }         // atomic
/// ```
///
/// One-shot access goes through one storage of the key, kept as long as the key; inside a `with…` binding of
/// ``WLStorageScope`` or ``WLStorageSystem``, through one of the closure's store, flushed after it.
public class WLStorageKeys: @unchecked Sendable {  // non-final, so unchecked; no state (a key's is under `shared`)
    init() {}

    /// The value of `key`. `WLStorageKeys[.count] += 1` is a get then a set; use ``update(_:_:)`` for that.
    public static subscript<Value>(key: WLStorageKey<Value>) -> Value {
        get { storage(key).wrappedValue }
        set { storage(key).wrappedValue = newValue }
    }

    /// Runs `body` on the value of `key` and stores what it leaves, atomically (see ``WLStorage/update(_:)``).
    @discardableResult
    public static func update<Value, Result>(
        _ key: WLStorageKey<Value>, _ body: (inout Value) throws -> Result
    ) rethrows -> Result {
        try storage(key).update(body)
    }

    /// Sets the value of `key` to its default, made now, and writes it as any set.
    public static func reset<Value>(_ key: WLStorageKey<Value>) { storage(key).wrappedValue = key.defaultValue }

    /// The value of `key` now, then every change (see ``WLStorage/values``).
    public static func values<Value>(_ key: WLStorageKey<Value>) -> AsyncStream<Value> { storage(key).values }

    /// The storage that one-shot access to `key` goes through, for ``WLStorage/flush()`` and the rest.
    public static func storage<Value>(_ key: WLStorageKey<Value>) -> WLStorage<Value> {
        if let binding = key.taskBinding { return binding.storage(of: key) }
        if let storage = key.shared.withLock({ $0 }), storage.isUsable { return storage }
        // Made outside the lock: making a storage may make the key's default, which is user code.
        let made = WLStorage(key)
        let (kept, extra) = key.shared.withLock { shared -> (WLStorage<Value>, WLStorage<Value>?) in
            if let current = shared, current.isUsable || !made.isUsable { return (current, made) }
            let replaced = shared
            shared = made
            return (made, replaced)
        }
        _ = extra  // released after the lock
        return kept
    }
}

extension WLStorage {
    /// Whether the storage can be kept for one-shot access: not after a type mismatch (made again until resolved).
    var isUsable: Bool { !cell.refusesEveryWrite }
}
