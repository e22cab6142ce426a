/// A setting declared once: its key, type, default, where it lives, how often it is written, how older types become it.
///
/// ```swift
/// extension WLStorageKeys {
///     static let theme = WLStorageKey<String>("theme", default: "dark", store: .suite("editor"))
/// }
///
/// struct Editor {
///     @WLStorage(.theme) var theme          // a property wrapper
/// }
/// let theme = WLStorage(.theme)             // a storage made in code
/// WLStorageKeys[.theme] = "light"           // one-shot access
/// ```
///
/// Declare keys as constants: a computed static member makes its store at each use. Every storage of a key shares one
/// value in the process; the default is made only when needed. A key may name a ``WLStorageScope`` instead of a store.
/// Two keys of one name and store with different value types report ``WLStorageError/Code/typeMismatch``.
public final class WLStorageKey<Value: Codable & Sendable>: WLStorageKeys, @unchecked Sendable {  // lock: `shared`
    /// Where a key's value lives: a store, the default directory, or a scope bound to one at start.
    enum Location: Sendable {
        case store(any WLStorageStore)
        /// The process's default directory, or the one ``WLStorageSystem/withDefaultDirectory(_:_:)`` sets for a task.
        case standard(WLStorageDirectoryStore)
        case scope(WLStorageScope)
    }

    /// The key the value is stored under.
    public let key: String
    /// Seconds between automatic writes, or `nil` for none until ``WLStorage/flush()``.
    public let flushInterval: Int?
    /// How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public let migrations: [WLStorageMigration<Value>]
    let location: Location
    let makeDefault: @Sendable () -> Value
    /// The storage of one-shot access (``WLStorageKeys/subscript(_:)``), made at first use, kept as long as the key.
    let shared = Lock<WLStorage<Value>?>(nil)

    /// A key in `store`.
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValue: The value to use, and save, when nothing is stored. Made only when it is needed.
    ///   - flushInterval: Seconds between automatic writes (default 1), or `nil` for none until ``WLStorage/flush()``.
    ///   - store: Where the value lives: `.standard` (the default directory where each storage is made), or any other
    ///     ``WLStorageStore``, made once with the key.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        _ key: String, default defaultValue: @autoclosure @escaping @Sendable () -> Value, flushInterval: Int? = 1,
        store: some WLStorageStore, migrations: [WLStorageMigration<Value>] = []
    ) {
        // `.standard` is the default directory where the key is used, not of the task that made the key.
        let followsDefault = (store as? WLStorageDirectoryStore)?.followsDefaultDirectory == true
        let location = followsDefault ? Location.standard(.processStandard()) : .store(store)
        self.init(key, defaultValue, flushInterval, location, migrations)
    }

    /// A key in the default directory, `.standard` (see ``WLStorageSystem/withDefaultDirectory(_:_:)``).
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValue: The value to use, and save, when nothing is stored. Made only when it is needed.
    ///   - flushInterval: Seconds between automatic writes (default 1), or `nil` for none until ``WLStorage/flush()``.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        _ key: String, default defaultValue: @autoclosure @escaping @Sendable () -> Value, flushInterval: Int? = 1,
        migrations: [WLStorageMigration<Value>] = []
    ) {
        self.init(key, defaultValue, flushInterval, .standard(.processStandard()), migrations)
    }

    /// A key in the store that `scope` is bound to when the first storage of the key is created.
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValue: The value to use, and save, when nothing is stored. Made only when it is needed.
    ///   - flushInterval: Seconds between automatic writes (default 1), or `nil` for none until ``WLStorage/flush()``.
    ///   - scope: The scope, bound to a store by ``WLStorageScope/bind(to:)`` before the key's first use.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        _ key: String, default defaultValue: @autoclosure @escaping @Sendable () -> Value, flushInterval: Int? = 1,
        scope: WLStorageScope, migrations: [WLStorageMigration<Value>] = []
    ) {
        self.init(key, defaultValue, flushInterval, .scope(scope), migrations)
    }

    private init(
        _ key: String, _ makeDefault: @escaping @Sendable () -> Value, _ flushInterval: Int?, _ location: Location,
        _ migrations: [WLStorageMigration<Value>]
    ) {
        self.key = key
        self.makeDefault = makeDefault
        self.flushInterval = flushInterval
        self.location = location
        self.migrations = migrations
        super.init()
    }

    /// The scope the key names, or `nil` when it names a store.
    public var scope: WLStorageScope? {
        if case .scope(let scope) = location { scope } else { nil }
    }

    /// The store the key's value lives in: the one it names, its scope's (`nil` while unbound), or a task binding's.
    public var store: (any WLStorageStore)? {
        if let binding = taskBinding { return binding.store }
        switch location {
        case .store(let store): return store
        case .standard(let store): return store
        case .scope(let scope): return scope.store
        }
    }

    /// The default value, made now.
    public var defaultValue: Value { makeDefault() }
}
