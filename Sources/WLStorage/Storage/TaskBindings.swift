/// The stores that ``WLStorageScope/withBinding(to:_:)`` and ``WLStorageSystem/withDefaultDirectory(_:_:)`` set for
/// a closure: storages made while it runs (in its task, its child tasks, or on the thread that runs a synchronous
/// closure) use them instead of the process's. A task local, so that tests running side by side in one process each
/// see their own.
struct TaskBindings: Sendable {
    /// The stores of scopes, by scope name.
    var scopes: [String: TaskBinding] = [:]
    /// The directory that `.standard` names, as a store.
    var defaultDirectory: TaskBinding?

    @TaskLocal static var current = TaskBindings()
}

/// A store set for a closure, with the storages of one-shot access (``WLStorageKeys/storage(_:)``) made in it: one per
/// key, kept as long as the binding and the key, so that one-shot access inside the closure shares one storage per key
/// as it does outside. The storages are released, and so flushed, when the closure has returned and no task started in
/// it holds the binding, or earlier once their key is gone (a key declared as a computed member is made at each use,
/// and no one-shot access can reach its storage again).
///
/// Its lock guards the table of storages only: no storage is made or released under it.
final class TaskBinding: Sendable {
    /// A storage of one-shot access, with its key, held weakly: its identifier is not that of a later key while it
    /// lives, and the storage goes once the key has gone.
    private struct OneShot: Sendable {
        weak var key: WLStorageKeys?
        let storage: any Sendable
    }

    let store: any WLStorageStore
    /// The storages of one-shot access, by key.
    private let oneShot = Lock<[ObjectIdentifier: OneShot]>([:])

    init(_ store: any WLStorageStore) {
        self.store = store
    }

    /// The storage that one-shot access to `key` goes through inside the closure: in this binding's store.
    func storage<Value>(of key: WLStorageKey<Value>) -> WLStorage<Value> {
        let id = ObjectIdentifier(key)
        if let kept = oneShot.withLock({ $0[id].flatMap { $0.key === key ? $0.storage : nil } }) as? WLStorage<Value>,
            kept.isUsable
        {
            return kept
        }
        // Made outside the lock: making a storage may make the key's default, which is user code.
        let made = WLStorage(key, in: store)
        let (kept, released) = oneShot.withLock { table -> (WLStorage<Value>, [any Sendable]) in
            // The storages of keys gone since leave the table with the lock's result.
            var released: [any Sendable] = []
            for (gone, entry) in table where entry.key == nil && gone != id {
                released.append(entry.storage)
                table[gone] = nil
            }
            if let entry = table[id], entry.key === key, let kept = entry.storage as? WLStorage<Value>,
                kept.isUsable || !made.isUsable
            {
                return (kept, released + [made])
            }
            if let replaced = table[id] { released.append(replaced.storage) }
            table[id] = OneShot(key: key, storage: made)
            return (made, released)
        }
        // A storage made at the same time by another thread, and those of keys gone, are released after the lock.
        _ = released
        return kept
    }
}
