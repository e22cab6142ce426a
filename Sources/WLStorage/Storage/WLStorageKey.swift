/// A setting declared once: its key, its type, its default, where it lives, how often it is written and how earlier
/// types become it.
///
/// Declare each key once, as a constant in an extension of ``WLStorageKeys``, and use it wherever the value is needed;
/// the compiler then checks its type at every use:
///
/// ```swift
/// extension WLStorageKeys {
///     static let theme = WLStorageKey<String>("theme", default: "dark", store: .suite("editor"))
/// }
///
/// struct Editor {
///     @WLStorage(.theme) var theme          // a property wrapper
/// }
/// let theme = WLStorage(.theme)             // a storage made in code: a `let` of a `Sendable` class, a global
/// WLStorageKeys[.theme] = "light"           // one-shot access, with no storage of your own
/// ```
///
/// A key declared as a constant makes its store once. A computed static member of `WLStorageKey` works too
/// (`static var theme: WLStorageKey<String> { .init("theme", default: "dark") }`), but makes its store at each use,
/// which costs much for an encrypted or a database's store.
///
/// Every storage of a key shares one value in the process, as storages of one string key in one store do: a set
/// through one is seen at once through every other.
///
/// The default is made only when it is needed: when nothing is stored, when a stored value lacks fields of the type,
/// or when another program removes the value. A key whose value is stored never makes it. (The default of
/// `@WLStorage(key:) var value = 3` is made at once, as any initial value of a property is.)
///
/// A key may name a ``WLStorageScope`` instead of a store: the program binds the scope to a store once, at start, so
/// that tests and environments choose the store without touching the declarations.
///
/// Two keys of the same name in the same store with different value types cannot share a value: while a storage of
/// the first is alive, a storage of the second keeps its value in memory only and reports
/// ``WLStorageError/Code/typeMismatch``, naming both types. Once no storage of the first is left, the second reads
/// what the first stored as any version of a type reads another's: what it cannot read is reported as
/// ``WLStorageError/Code/storedByAnotherVersion`` and left as it is.
// @unchecked Sendable: a subclass cannot be checked. Every stored property is a constant of a Sendable type, and the
// one mutable state, the one-shot storage, is guarded by its own lock, `shared`.
public final class WLStorageKey<Value: Codable & Sendable>: WLStorageKeys, @unchecked Sendable {  // lock: `shared`
    /// Where a key's value lives: a store, the default directory, or a scope bound to one at start.
    enum Location: Sendable {
        case store(any WLStorageStore)
        /// The default directory: the process's (this store, made with the key), or the one that
        /// ``WLStorageSystem/withDefaultDirectory(_:_:)`` sets for a task.
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
    /// The storage of one-shot access (``WLStorageKeys/subscript(_:)``), made at its first use and kept as long as the
    /// key.
    let shared = Lock<WLStorage<Value>?>(nil)

    /// A key in `store`.
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValue: The value to use, and save where nothing is stored, when nothing is stored. Made only when
    ///     it is needed, once per process (per storage when storages of the key are created one after another's end).
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``WLStorage/flush()``. Defaults
    ///     to 1.
    ///   - store: Where the value lives: `.standard`, `.directory(url)`, `.suite(name)`, a prefixed or encrypted store,
    ///     or any other ``WLStorageStore``. A key declared as a computed static member makes its store at each use;
    ///     declare it as a constant of ``WLStorageKeys`` instead, or name a scope. `.standard` is the default
    ///     directory at each storage's creation (see ``WLStorageSystem/withDefaultDirectory(_:_:)``); any other store,
    ///     including one made from `.standard` such as `.prefix(_:)`, is the one made with the key.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        _ key: String, default defaultValue: @autoclosure @escaping @Sendable () -> Value, flushInterval: Int? = 1,
        store: some WLStorageStore, migrations: [WLStorageMigration<Value>] = []
    ) {
        // `.standard` is the default directory wherever the key is used, not the one of the task that made the key.
        let followsDefault = (store as? WLStorageDirectoryStore)?.followsDefaultDirectory == true
        let location = followsDefault ? Location.standard(.processStandard()) : .store(store)
        self.init(key, defaultValue, flushInterval, location, migrations)
    }

    /// A key in the default directory, ``WLStorageStore/standard``: the process's, or, for a storage made inside
    /// ``WLStorageSystem/withDefaultDirectory(_:_:)``, the directory set for the closure.
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValue: The value to use, and save where nothing is stored, when nothing is stored. Made only when
    ///     it is needed.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``WLStorage/flush()``. Defaults
    ///     to 1.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        _ key: String, default defaultValue: @autoclosure @escaping @Sendable () -> Value, flushInterval: Int? = 1,
        migrations: [WLStorageMigration<Value>] = []
    ) {
        self.init(key, defaultValue, flushInterval, .standard(.processStandard()), migrations)
    }

    /// A key in the store that `scope` is bound to when the first storage of the key is created.
    ///
    /// ```swift
    /// extension WLStorageScope {
    ///     static let settings = WLStorageScope("settings")
    /// }
    /// extension WLStorageKeys {
    ///     static let retries = WLStorageKey<Int>("retries", default: 3, scope: .settings)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValue: The value to use, and save where nothing is stored, when nothing is stored. Made only when
    ///     it is needed.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``WLStorage/flush()``. Defaults
    ///     to 1.
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
        if case .scope(let scope) = location { return scope }
        return nil
    }

    /// The store the key's value lives in: the one it names, or the one its scope is bound to (`nil` while the scope
    /// is not bound). Inside ``WLStorageScope/withBinding(to:_:)`` for its scope, or
    /// ``WLStorageSystem/withDefaultDirectory(_:_:)`` for a key of the default directory, the store set for the
    /// closure. Reading it does not count as a use of the scope.
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
