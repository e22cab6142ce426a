/// The program's keys, declared once as constants, and one-shot access to their values.
///
/// Declare each key as a static constant in an extension of this class; `WLStorageKey` inherits from it, so a key is
/// named `.theme` wherever a key is expected:
///
/// ```swift
/// extension WLStorageKeys {
///     static let launches = WLStorageKey<Int>("launches", default: 0)
///     static let theme = WLStorageKey<String>("theme", default: "dark", store: .suite("com.example.editor"))
/// }
///
/// WLStorageKeys[.launches] += 1                      // a get and a set
/// WLStorageKeys.update(.launches) { $0 += 1 }         // atomic
/// @WLStorage(.theme) var theme                        // a property wrapper of the key, in a type
/// ```
///
/// One-shot access goes through one storage of the key, made at its first use and kept as long as the key: for a
/// constant, until the program ends, when it is flushed with every other storage. It shares its value with every
/// other storage of the key in the process, and writes and observes it as they do.
///
/// Inside ``WLStorageScope/withBinding(to:_:)`` for the key's scope, or ``WLStorageSystem/withDefaultDirectory(_:_:)``
/// for a key of the default directory, one-shot access goes through another storage of the key, in the store set for
/// the closure, kept until the closure has returned (and the tasks started in it have ended), then released and
/// flushed.
// @unchecked Sendable: a non-final class cannot be checked. It has no stored state, so no lock; only WLStorageKey,
// whose one mutable state is guarded by its lock `shared`, inherits from it.
public class WLStorageKeys: @unchecked Sendable {  // no stored state, no lock (see above)
    init() {}

    /// The value of `key`: read from memory, and set as a storage's value is (written in the background, throttled by
    /// the key's flush interval).
    ///
    /// `WLStorageKeys[.count] += 1` is a get and then a set: two threads that do it at once can lose a change. Use
    /// ``update(_:_:)`` for a change that depends on the value.
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
    public static func reset<Value>(_ key: WLStorageKey<Value>) {
        storage(key).wrappedValue = key.defaultValue
    }

    /// The value of `key` now, then every change: this process's and, where the store reports them, other programs'
    /// (see ``WLStorage/values``).
    public static func values<Value>(_ key: WLStorageKey<Value>) -> AsyncStream<Value> {
        storage(key).values
    }

    /// The storage that one-shot access to `key` goes through: for what else a storage does (``WLStorage/flush()``,
    /// ``WLStorage/onChange(queue:_:)``, ``WLStorage/lastError``).
    public static func storage<Value>(_ key: WLStorageKey<Value>) -> WLStorage<Value> {
        // Inside `withBinding(to:_:)` or `withDefaultDirectory(_:_:)`, the storage of the store set for the closure.
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
        // A storage made at the same time by another thread, or the one replaced, is released after the lock.
        _ = extra
        return kept
    }
}

extension WLStorage {
    /// Whether the storage can be kept for one-shot access: any storage but one made while its key was open with
    /// another value type, which keeps its value in memory only. Such a storage is made again at each access until
    /// no storage of the other type is left, so that one-shot access then stores its values, and shares them with
    /// every other storage of the key, rather than keeping them in memory for as long as the key.
    var isUsable: Bool { !cell.refusesEveryWrite }
}
