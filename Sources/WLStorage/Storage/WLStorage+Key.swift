extension WLStorage {
    /// Creates a storage of a typed key: its key, default, store or scope, flush interval and migrations are the key's.
    ///
    /// ```swift
    /// @WLStorage(.theme) var theme       // a property wrapper
    /// let theme = WLStorage(.theme)      // a storage made in code
    /// ```
    ///
    /// - Parameter key: The key, for instance a static member: `.theme`.
    public convenience init(_ key: WLStorageKey<T>) {
        self.init(key, in: key.storeForUse())
    }

    /// Creates a storage of a typed key in `store`, whatever the key names; the default is made only when needed.
    convenience init(_ key: WLStorageKey<T>, in store: any WLStorageStore) {
        let lazyDefault = LazyDefault(key.makeDefault)
        self.init(
            defaultValueClosure: { lazyDefault.value }, lazyDefault: lazyDefault,
            flushInterval: key.flushInterval.map { Duration.seconds(max(0, $0)) },
            binding: KeyBinding(key: key.key, store: store), migrations: key.migrations,
            scheduler: Runtime.shared.scheduler)
    }
}

extension WLStorageKey {
    /// The store a storage of the key is made in: the current task's, or the process's (marking a scope used).
    func storeForUse() -> any WLStorageStore {
        switch location {
        case .store(let store): store
        case .standard(let store): TaskBindings.current.defaultDirectory?.store ?? store
        case .scope(let scope): scope.storeForUse()
        }
    }

    /// The store set for the current task by a scope's or the default directory's `with…` binding, if any.
    var taskBinding: TaskBinding? {
        switch location {
        case .store: nil
        case .standard: TaskBindings.current.defaultDirectory
        case .scope(let scope): TaskBindings.current.scopes[scope.name]
        }
    }
}
