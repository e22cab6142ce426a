extension WLStorage {
    /// Creates a storage of a typed key: its key, default, store or scope, flush interval and migrations are the
    /// key's.
    ///
    /// ```swift
    /// @WLStorage(.theme) var theme       // a property wrapper
    /// let theme = WLStorage(.theme)      // a storage made in code
    /// ```
    ///
    /// Every storage of the key shares one value in the process. The default is made only when it is needed.
    ///
    /// When the key names a scope that is not bound to a store, the storage is still made: it keeps its default in
    /// memory, keeps its changes pending without writing them, and reports ``WLStorageError/Code/invalidConfiguration``
    /// (to ``WLStorageSystem/errorHandler`` and in ``lastError``), saying which scope to bind.
    ///
    /// - Parameter key: The key, for instance a static member: `.theme`.
    public convenience init(_ key: WLStorageKey<T>) {
        self.init(key, in: key.storeForUse())
    }

    /// Creates a storage of a typed key in `store`, whatever the key names.
    convenience init(_ key: WLStorageKey<T>, in store: any WLStorageStore) {
        self.init(
            key: key.key, lazyDefault: LazyDefault(key.makeDefault), flushInterval: key.flushInterval,
            store: store, migrations: key.migrations)
    }
}

extension WLStorageKey {
    /// The store a storage of the key is made in: the one set for the current task, if any, or the process's. A scope
    /// bound process-wide counts as used from now on.
    func storeForUse() -> any WLStorageStore {
        switch location {
        case .store(let store): store
        case .standard(let store): TaskBindings.current.defaultDirectory?.store ?? store
        case .scope(let scope): scope.storeForUse()
        }
    }

    /// The store set for the current task by ``WLStorageScope/withBinding(to:_:)`` (for a key of a scope) or
    /// ``WLStorageSystem/withDefaultDirectory(_:_:)`` (for a key of the default directory), if any.
    var taskBinding: TaskBinding? {
        switch location {
        case .store: nil
        case .standard: TaskBindings.current.defaultDirectory
        case .scope(let scope): TaskBindings.current.scopes[scope.name]
        }
    }
}
