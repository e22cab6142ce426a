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
/// key, kept as long as the binding, so that one-shot access inside the closure shares one storage per key as it does
/// outside. The storages are released, and so flushed, when the closure has returned and no task started in it holds
/// the binding.
///
/// Its lock guards the table of storages only: no storage is made or released under it.
final class TaskBinding: Sendable {
    let store: any WLStorageStore
    /// The storages of one-shot access, by key; the key is kept with its storage so that its identifier is not reused.
    private let oneShot = Lock<[ObjectIdentifier: (key: WLStorageKeys, storage: any Sendable)]>([:])

    init(_ store: any WLStorageStore) {
        self.store = store
    }

    /// The storage that one-shot access to `key` goes through inside the closure: in this binding's store.
    func storage<Value>(of key: WLStorageKey<Value>) -> WLStorage<Value> {
        let id = ObjectIdentifier(key)
        if let kept = oneShot.withLock({ $0[id]?.storage }) as? WLStorage<Value> { return kept }
        // Made outside the lock: making a storage may make the key's default, which is user code.
        let made = WLStorage(key, in: store)
        let (kept, extra) = oneShot.withLock { table -> (WLStorage<Value>, WLStorage<Value>?) in
            if let kept = table[id]?.storage as? WLStorage<Value> { return (kept, made) }
            table[id] = (key, made)
            return (made, nil)
        }
        // A storage made at the same time by another thread is released after the lock.
        _ = extra
        return kept
    }
}
