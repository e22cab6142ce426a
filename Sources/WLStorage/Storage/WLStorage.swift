/// A value that lives in memory, is safe to use from any thread, and persists itself as JSON in the background.
///
/// ```swift
/// @WLStorage(key: "first_name", defaultValue: nil)
/// var firstName: String?
/// ```
///
/// - The initializer reads the value once. When nothing is stored, the default is used (and the file backer saves
///   it): a default never replaces a value someone stored.
/// - Every get and set takes a brief lock; a set is visible to every thread at once and never waits for the disk.
/// - Writes are throttled: the first change after a quiet interval is written at once; later changes within
///   `flushInterval` seconds collapse into one write at its end. With `nil`, nothing is written until ``flush()``.
/// - ``flush()``, `deinit`, normal exit, SIGTERM, SIGINT and SIGHUP write the pending value.
/// - Storages of the same file in one process share one value; one with another value type keeps its value in
///   memory only and reports ``WLStorageError/Code/typeMismatch``.
/// - A failed write stays pending and is retried; errors go to ``WLStorageSystem/errorHandler`` and ``lastError``.
@propertyWrapper
public final class WLStorage<T: Codable & Sendable>: Sendable {
    @usableFromInline
    let cell: StorageCell<T>

    /// The storage key.
    public var key: String { cell.backer.key }

    /// Creates a storage of `key` in the default directory, with `defaultValue` when nothing is stored.
    ///
    /// - Parameters:
    ///   - key: The key. Any string; see ``WLStorageDefaultBacker`` for how it names the file.
    ///   - defaultValue: The value to use, and save, when nothing is stored.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        key: String, defaultValue: T, flushInterval: Int? = 1, migrations: [WLStorageMigration<T>] = []
    ) {
        self.init(key: key, defaultValueClosure: { defaultValue }, flushInterval: flushInterval, migrations: migrations)
    }

    /// Creates a storage of `key` in the default directory, calling `defaultValueClosure` when nothing is stored.
    ///
    /// - Parameters:
    ///   - key: The key. Any string; see ``WLStorageDefaultBacker`` for how it names the file.
    ///   - defaultValueClosure: Makes the value to use, and save, when nothing is stored; called at most once.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        key: String, defaultValueClosure: () -> T, flushInterval: Int? = 1, migrations: [WLStorageMigration<T>] = []
    ) {
        self.init(
            defaultValueClosure: defaultValueClosure,
            flushInterval: flushInterval.map { Duration.seconds(max(0, $0)) },
            binding: KeyBinding(key: WLStorageDefaultBacker<T>(key: key)), migrations: migrations,
            scheduler: Runtime.shared.scheduler)
    }

    /// Creates a storage of `key` in the default directory, with the property's initial value as its default (made
    /// once, when the storage is created): `@WLStorage(key: "theme") var theme = "dark"`.
    ///
    /// - Parameters:
    ///   - wrappedValue: The default: the value to use, and save, when nothing is stored.
    ///   - key: The key. Any string; see ``WLStorageDefaultBacker`` for how it names the file.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init(
        wrappedValue: @autoclosure () -> T, key: String, flushInterval: Int? = 1,
        migrations: [WLStorageMigration<T>] = []
    ) {
        self.init(key: key, defaultValueClosure: wrappedValue, flushInterval: flushInterval, migrations: migrations)
    }

    /// Creates a storage of `key` in `store`, with the property's initial value as its default:
    /// `@WLStorage(key: "theme", store: .suite("editor")) var theme = "dark"`.
    ///
    /// - Parameters:
    ///   - wrappedValue: The default: the value to use, and save, when nothing is stored.
    ///   - key: The key. Any string.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - store: Where the value lives.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init<Store: WLStorageStore>(
        wrappedValue: @autoclosure () -> T, key: String, flushInterval: Int? = 1, store: Store,
        migrations: [WLStorageMigration<T>] = []
    ) {
        self.init(
            key: key, defaultValueClosure: wrappedValue, flushInterval: flushInterval, store: store,
            migrations: migrations)
    }

    /// Creates a storage kept by `backer`, with the property's initial value as its default.
    ///
    /// - Parameters:
    ///   - wrappedValue: The default, used when the backer holds nothing; never written, only changes are.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - backer: Where the value is read from and written to.
    public convenience init(wrappedValue: @autoclosure () -> T, flushInterval: Int? = 1, backer: any WLStorageBacker<T>)
    {
        self.init(defaultValueClosure: wrappedValue, flushInterval: flushInterval, backer: backer)
    }

    /// Creates a storage kept by `backer`.
    ///
    /// - Parameters:
    ///   - defaultValueClosure: Makes the value to use when the backer holds nothing; called once, never written.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - backer: Where the value is read from and written to.
    public convenience init(defaultValueClosure: () -> T, flushInterval: Int? = 1, backer: any WLStorageBacker<T>) {
        self.init(
            defaultValueClosure: defaultValueClosure,
            flushInterval: flushInterval.map { Duration.seconds(max(0, $0)) },
            backer: backer,
            scheduler: Runtime.shared.scheduler)
    }

    /// Creates a storage of `key` in `store`, with `defaultValue` when nothing is stored.
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValue: The value to use, and save, when nothing is stored.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - store: Where the value lives: `.standard`, `.directory(url)`, `.suite(name)`, or any ``WLStorageStore``.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init<Store: WLStorageStore>(
        key: String, defaultValue: T, flushInterval: Int? = 1, store: Store, migrations: [WLStorageMigration<T>] = []
    ) {
        self.init(
            key: key, defaultValueClosure: { defaultValue }, flushInterval: flushInterval, store: store,
            migrations: migrations)
    }

    /// Creates a storage of `key` in `store`, calling `defaultValueClosure` when nothing is stored.
    ///
    /// - Parameters:
    ///   - key: The key. Any string.
    ///   - defaultValueClosure: Makes the value to use, and save, when nothing is stored; called once.
    ///   - flushInterval: Seconds between automatic writes, or `nil` for none until ``flush()``. Defaults to 1.
    ///   - store: Where the value lives.
    ///   - migrations: How values stored as earlier types become this one (see <doc:ChangingAStoredType>).
    public convenience init<Store: WLStorageStore>(
        key: String, defaultValueClosure: () -> T, flushInterval: Int? = 1, store: Store,
        migrations: [WLStorageMigration<T>] = []
    ) {
        self.init(
            defaultValueClosure: defaultValueClosure,
            flushInterval: flushInterval.map { Duration.seconds(max(0, $0)) },
            binding: KeyBinding(key: key, store: store), migrations: migrations,
            scheduler: Runtime.shared.scheduler)
    }

    /// Creates a storage with an interval of any precision and the given scheduler (tests inject a manual clock).
    package convenience init(
        defaultValueClosure: () -> T, flushInterval: Duration?, backer: any WLStorageBacker<T>,
        migrations: [WLStorageMigration<T>] = [], scheduler: any WriteScheduler
    ) {
        self.init(
            defaultValueClosure: defaultValueClosure, flushInterval: flushInterval, binding: KeyBinding(backer: backer),
            migrations: migrations, scheduler: scheduler)
    }

    /// Opens the key of `binding`: joins the key's live cell if there is one, else makes a cell of what it reads.
    init(
        defaultValueClosure: () -> T, lazyDefault: LazyDefault<T>? = nil, flushInterval: Duration?,
        binding: KeyBinding<T>, migrations: [WLStorageMigration<T>], scheduler: any WriteScheduler
    ) {
        ShutdownHandling.storageCreated()
        // Whichever cell the storage ends with counts it, until its deinit.
        defer { cell.storageAttached() }
        let interval = flushInterval.map { UInt64(ShutdownHandling.nanoseconds($0)) }
        var binding = binding
        /// The key's live cell, joined; a cell of `value` in memory only when the key is open with another type.
        func existing(_ found: StorageRegistry.Lookup<T>, value: @autoclosure () -> T) -> StorageCell<T>? {
            switch found {
            case .found(let cell):
                cell.add(migrations)
                cell.join(interval: interval)
                return cell
            case .mismatch(let other):
                return binding.detachedCell(value(), other: other, scheduler: scheduler)
            case .none:
                return nil
            }
        }
        if let existing = existing(binding.follow(makeDefault: defaultValueClosure), value: defaultValueClosure()) {
            self.cell = existing
            return
        }
        let opening = binding.read(makeDefault: defaultValueClosure, lazyDefault: lazyDefault, migrations: migrations)
        let cell = binding.makeCell(opening, migrations: migrations, interval: interval, scheduler: scheduler)
        // Another thread opened the key meanwhile: its cell wins, this one is dropped unwritten.
        if let existing = existing(binding.register(cell), value: opening.value) {
            self.cell = existing
            return
        }
        self.cell = cell
        if let readError = opening.readError {
            cell.record(readError)
            if opening.stored == .unknown && CellState<T>.isTransient(readError) { cell.retryUnknownRead() }
        }
        if opening.stored == .defaultUnsaved { cell.armTick(force: true) }
        if opening.rewrite { cell.rewriteStoredValue() }
        binding.catchUp(cell)
    }

    deinit { cell.storageReleased() }

    /// The value. Reading and writing it is safe from any thread; writing never waits for the disk.
    ///
    /// - Important: Each get and each set is atomic, but `count += 1` or `settings.fontSize = 15` is a get then a
    ///   set, and two threads doing it at once can lose an update; use ``update(_:)`` for such changes.
    @inlinable
    public var wrappedValue: T {
        get { cell.get() }
        set { cell.set(newValue) }
    }

    /// Changes the value in place, atomically: `$count.update { $0 += 1 }` loses no increment. Observers are told once,
    /// and the result is written as a set's is.
    ///
    /// `body` runs on a copy, outside every lock of the package; the copy is stored only if no other change came
    /// meanwhile, else `body` runs again on the newer value, so it should only compute. In a store that writes on
    /// condition (``WLStorageConditionalStore``), the update is made in the store, atomic for every process, and waits
    /// for it (retrying up to 10 seconds); one that could not be stored is reported and not made later.
    ///
    /// - Important: `body` must not set or update this storage itself: that is refused and reported as
    ///   ``WLStorageError/Code/reentrantCall``, and the outer update goes on.
    ///
    /// - Parameter body: Changes the value it is given.
    /// - Returns: What `body` returns, from the run whose value was stored (from its last run when none was).
    /// - Throws: What `body` throws; the value is then left as it was.
    @discardableResult
    public func update<R>(_ body: (inout T) throws -> R) rethrows -> R { try cell.update(body) }

    /// The storage itself, so that `$name.flush()` works where the property wrapper is used.
    public var projectedValue: WLStorage<T> { self }

    /// Writes the pending value and returns when it is written.
    ///
    /// Does nothing when nothing is pending; waits for a write in flight, then writes whatever is newer. A failed write
    /// stays pending, is reported and kept in ``lastError``, and is retried with a doubling wait (100 ms up to 30 s).
    ///
    /// - Important: The write runs on the calling thread. Never call it from this storage's backer (it would wait for
    ///   itself), nor from ``WLStorageSystem/errorHandler`` for this storage's error (it would retry without end).
    public func flush() { cell.flushReportingMisuse() }

    /// Writes the value as its type encodes it, dropping stored fields the type does not know; returns once written.
    ///
    /// Call it once every program sharing the key has dropped a field (see <doc:ChangingAStoredType>): a write normally
    /// keeps unknown fields. Over another version's value this one cannot read, with nothing pending, it writes
    /// nothing. A custom ``WLStorageBacker`` only gets the value written.
    public func removeUnknownFields() { cell.removeUnknownFields() }

    /// Whether a change has not been written yet.
    public var hasPendingChanges: Bool { cell.hasPendingChanges }

    /// The error of the latest failed read or write; `nil` again once a write succeeds. A reentrant call's error
    /// (``WLStorageError/Code/reentrantCall``) stays until a later change is written or another error replaces it.
    public var lastError: WLStorageError? { cell.lastError }
}

/// The backer of a storage that must not write: it reads nothing, and refuses every write with the reason.
struct RefusingBacker<T: Codable & Sendable>: WLStorageBacker {
    let refusal: WLStorageError
    var key: String { refusal.key ?? "" }
    func read(defaultValueClosure: () -> T) -> T { defaultValueClosure() }
    func write(value: T) throws { throw refusal }
}
