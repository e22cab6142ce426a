/// The stores a closure binds (scopes, default directory), as a task local: parallel tests each see their own.
struct TaskBindings: Sendable {
    /// The stores of scopes by name, and the directory that `.standard` names.
    var scopes: [String: TaskBinding] = [:]
    var defaultDirectory: TaskBinding?

    @TaskLocal static var current = TaskBindings()
}

/// A store set for a closure, with its one-shot storages (one per key), released and flushed once the closure has
/// returned and no task holds it or their key is gone. The lock guards the table: no storage is made or freed under it.
final class TaskBinding: Sendable {
    /// A one-shot storage with its key, held weakly: the storage goes once the key has gone.
    private struct OneShot: Sendable {
        weak var key: WLStorageKeys?
        let storage: any Sendable
    }

    let store: any WLStorageStore
    private let oneShot = Lock<[ObjectIdentifier: OneShot]>([:])

    init(_ store: any WLStorageStore) { self.store = store }

    /// The storage that one-shot access to `key` goes through inside the closure: in this binding's store.
    func storage<Value>(of key: WLStorageKey<Value>) -> WLStorage<Value> {
        let id = ObjectIdentifier(key)
        if let kept = oneShot.withLock({ $0[id].flatMap { $0.key === key ? $0.storage : nil } }) as? WLStorage<Value>,
            kept.isUsable
        {
            return kept
        }
        // Made outside the lock: it may make the key's default, which is user code.
        let made = WLStorage(key, in: store)
        let (kept, released) = oneShot.withLock { table -> (WLStorage<Value>, [any Sendable]) in
            // Storages of keys gone leave the table with the lock's result.
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
        _ = released  // after the lock
        return kept
    }
}
