import WLStorageFiles

/// How a storage is bound to its key: the one place that knows the kinds of backer, and the steps every storage
/// takes to open its key, in order: ``follow(makeDefault:)`` before anything is read (so no change after the read is
/// missed; it waits while another thread opens the key), `read`, `makeCell`, ``register(_:)`` and ``catchUp(_:)``.
struct KeyBinding<T: Codable & Sendable> {
    private enum Kind {
        /// A custom backer with a change feed, until following begins: then it is wrapped (``observed``).
        case observable(any WLStorageObservableBacker<T>)
        case observed(ObservedBacker<T>, FeedTarget<T>)
        case plain
    }

    /// The first state of a new cell; `rewrite`: read through a migration, to be written back in the current shape.
    struct Opening {
        var value: T
        var stored: StoredState
        var defaults: CellDefault<T>
        var readError: WLStorageError?
        var rewrite: Bool
        @inline(__always)  // called, it looks its generic types' metadata up again
        init(value: T, stored: StoredState, defaults: CellDefault<T>, readError: WLStorageError?, rewrite: Bool) {
            (self.value, self.stored, self.defaults) = (value, stored, defaults)
            (self.readError, self.rewrite) = (readError, rewrite)
        }
    }

    private(set) var backer: any WLStorageBacker<T>
    private let keyBacker: WLStorageDefaultBacker<T>?  // apart from `kind`, whose switch looks its metadata up
    private var kind: Kind
    /// What the directory of the file is, when known, and whether it was prepared before the read.
    private var identity: DirectoryIdentity?
    private var prepared = false
    /// Whether this binding holds a use of the directory's watch or of the store's feed, which the new cell adopts.
    private var watched = false
    /// What the watch or the feed had reported when following began (see ``ChangeRouter``).
    private var reports = ChangeRouter.Reports()
    /// The right to open the key, held from following until ``register(_:)``: other storages of the key wait for it.
    private var opening: CellKey?

    /// The binding of `backer`: the only place where a backer's kind is found by casts.
    @inline(__always)
    init(backer: any WLStorageBacker<T>) {
        self.backer = backer
        func cast(_ it: some WLStorageBacker<T>) -> WLStorageDefaultBacker<T>? { it as? WLStorageDefaultBacker<T> }
        keyBacker = cast(backer)  // opened: from its class, not from the existential, whose metadata costs a look-up
        if keyBacker == nil, let observable = backer as? any WLStorageObservableBacker<T> {
            kind = .observable(observable)
        } else {
            kind = .plain
        }
    }

    @inline(__always)
    init(key keyBacker: WLStorageDefaultBacker<T>) { (backer, self.keyBacker, kind) = (keyBacker, keyBacker, .plain) }

    /// The binding of `key` in `store`: a file for a directory (through key-changing stores), else the store's key.
    init(key: String, store: any WLStorageStore) {
        let (resolved, storedKey) = Stores.resolve(store, key)
        let capabilities = Stores.capabilities(of: resolved)
        if let directory = capabilities.directory {
            self.init(key: WLStorageDefaultBacker<T>(key: storedKey, directory: directory.url))
        } else {
            let medium = StoreMedium(store: resolved, storedKey: storedKey, capabilities: capabilities)
            self.init(key: WLStorageDefaultBacker<T>(key: key, medium: medium))
        }
    }

    @inline(__always) private var own: OwnBacker<T> {
        if let keyBacker { return .key(keyBacker) }
        return if case .observed(let observed, _) = kind { .observed(observed) } else { .other(backer) }
    }

    /// Starts following outside changes and finds the key's live cell, if any; when found, following stops again.
    @inline(__always) mutating func follow(makeDefault: () -> T) -> StorageRegistry.Lookup<T> {
        if let keyBacker {
            return switch keyBacker.source {
            case .file(let directory, let name): follow(directory: directory, name: name)
            case .store(let medium): follow(store: medium)
            case .none: .none
            }
        }
        switch kind {
        case .observable(let observable):
            // A change the feed reports before the cell exists is checked once the cell is there.
            let target = FeedTarget<T>()
            let observation = observable.observeChanges { [target] in target.changed() }
            let made = makeDefault()
            let observed = ObservedBacker(observable, defaultValue: made, observation: observation)
            (backer, kind) = (observed, .observed(observed, target))
            return .none
        case .observed, .plain:
            return .none
        }
    }

    private mutating func follow(directory: StorageDirectory, name: String) -> StorageRegistry.Lookup<T> {
        // A failure to prepare the directory is reported by the read; another's lock on it is not waited for here.
        identity = try? DirectoryTable.prepare(directory, waiting: false)
        prepared = identity != nil
        // Keyed by the directory the monitor watches, which a retargeted symlink may have changed.
        let watch = Runtime.shared.router.follow(directory: directory)
        identity = watch.identity ?? identity
        let found: StorageRegistry.Lookup<T>
        (found, opening) = Runtime.shared.registry.open(file: name, in: directory, identity: &identity, as: T.self)
        guard case .none = found else {
            Runtime.shared.router.unfollow(.directory(directory))
            return found
        }
        (watched, reports) = (true, watch.reports)
        return .none
    }

    private mutating func follow(store medium: StoreMedium) -> StorageRegistry.Lookup<T> {
        reports = Runtime.shared.router.follow(store: medium.store, identity: medium.identity)
        let found: StorageRegistry.Lookup<T>
        (found, opening) = Runtime.shared.registry.open(.store(medium.identity, key: medium.storedKey), as: T.self)
        guard case .none = found else {
            Runtime.shared.router.unfollow(.store(medium.identity))
            return found
        }
        watched = true
        return .none
    }

    /// Reads the first state of a new cell. A storage that follows outside changes needs its default for a removal:
    /// `lazyDefault`, or made now. A plain custom backer asks for the default only when it holds nothing.
    @inline(__always)
    func read(makeDefault: () -> T, lazyDefault: LazyDefault<T>?, migrations: [WLStorageMigration<T>]) -> Opening {
        func decoding(_ made: CellDefault<T>) -> ValueDecoding<T> {
            ValueDecoding(defaultValue: { made.value }, migrations: migrations)
        }
        // Not `lazyDefault.map(…) ?? …`: its optionals are more generic types to look up per storage.
        @inline(__always)
        func made() -> CellDefault<T> {
            if let lazyDefault { return .lazy(lazyDefault) }
            return .made(makeDefault())
        }
        if let keyBacker {
            let made = made()
            if migrations.count > 0 { keyBacker.addRenames(migrations.compactMap(\.rename)) }
            let found = keyBacker.readStored(prepared: prepared, decoding: decoding(made))
            return Self.opening(found, defaults: made, savesDefault: keyBacker.savesDefault)
        }
        switch kind {
        case .observed(let observed, _):
            // The default made when following began: the wrapper holds it.
            let made = CellDefault.made(observed.defaultValue)
            return Self.opening(observed.readStored(decoding: decoding(made)), defaults: made, savesDefault: false)
        case .observable, .plain:
            return readPlain(makeDefault: makeDefault)
        }
    }

    /// Out of line: its optional is a generic type to look up, which a file's opening need not.
    @inline(never)
    private func readPlain(makeDefault: () -> T) -> Opening {
        var made: T?
        let found = backer.readResult {
            let value = made ?? makeDefault()
            made = value
            return value
        }
        let defaultValue = if case .value(let read) = found { made ?? read } else { made ?? makeDefault() }
        return Self.opening(found, defaults: .made(defaultValue), savesDefault: false)
    }

    /// The first state of a cell that read `found`; only a store key's backer saves its default where nothing is.
    @inline(__always)
    private static func opening(_ found: ReadResult<T>, defaults: CellDefault<T>, savesDefault: Bool) -> Opening {
        switch found {
        case .value(let value):
            return Opening(value: value, stored: .known, defaults: defaults, readError: nil, rewrite: false)
        case .reshaped(let value, let rewrites, let note):
            // Read through the added fields or a migration: written back in the current shape, as a change.
            return Opening(value: value, stored: .known, defaults: defaults, readError: note, rewrite: rewrites)
        case .absent, .movedAside:
            let movedAside: WLStorageError? = if case .movedAside(let error) = found { error } else { nil }
            return Opening(
                value: defaults.value, stored: savesDefault ? .defaultUnsaved : .known, defaults: defaults,
                readError: movedAside, rewrite: false)
        case .anotherVersion(let error):
            // Left as it is, not replaced by the default: only a set is written over it.
            return Opening(value: defaults.value, stored: .known, defaults: defaults, readError: error, rewrite: false)
        case .failed(let error):
            return Opening(
                value: defaults.value, stored: .unknown, defaults: defaults, readError: error, rewrite: false)
        }
    }

    /// A new cell of the key, in the state `opening` read; it takes over the watch or the feed this binding holds.
    @inline(__always)
    func makeCell(
        _ opening: Opening, migrations: [WLStorageMigration<T>], interval: UInt64?, scheduler: any WriteScheduler
    ) -> StorageCell<T> {
        let cell = StorageCell(
            value: opening.value, stored: opening.stored, defaults: opening.defaults, migrations: migrations, own: own,
            interval: interval, scheduler: scheduler)
        if watched { cell.adoptWatch() }
        return cell
    }

    /// A cell that keeps `value` in memory only, its key being open with another value type, `other`; its writes fail.
    func detachedCell(_ value: T, other: String, scheduler: any WriteScheduler) -> StorageCell<T> {
        let mismatch = WLStorageError(
            code: .typeMismatch,
            message:
                "a storage of \(other) has the \(keyBacker?.directory != nil ? "file" : "key") in use in this"
                + " process, and this storage's type is \(TypeName.of(T.self)): it keeps its value in memory only and"
                + " never writes it (storages of one key share one value, of one type)",
            key: backer.key,
            path: keyBacker?.fileURL?.path)
        let cell = StorageCell(
            value: value, stored: .known, defaults: .made(value), own: .refusing(RefusingBacker(refusal: mismatch)),
            interval: nil, scheduler: scheduler)
        cell.record(mismatch)
        return cell
    }

    /// Makes `cell` the key's, or returns the cell (or value type) another thread registered meanwhile, dropping `cell`
    /// unwritten. Either way, storages waiting for this opening go on.
    @inline(__always) mutating func register(_ cell: StorageCell<T>) -> StorageRegistry.Lookup<T> {
        defer { if let opening = opening.take() { Runtime.shared.registry.opened(opening) } }
        if identity == nil, let directory = keyBacker?.directory {
            // The read may have prepared the directory: keyed by what it is, as every storage of its file will be.
            identity = DirectoryTable.identity(of: directory)
        }
        let found = Runtime.shared.registry.register(cell, identity: &identity)
        if case .none = found {
            // The backer is this cell's now: its writes are the storage's own (see ``WLStorageDefaultBacker``).
            keyBacker?.attach()
        }
        return found
    }

    /// Checks for a change between following and registering `cell`, which found no cell to tell.
    @inline(__always) func catchUp(_ cell: StorageCell<T>) {
        if let keyBacker {
            guard watched else { return }
            switch keyBacker.source {
            case .file(let directory, _):
                // The cell follows the path where the monitor saw it lead, and checks its file once more.
                guard Runtime.shared.router.reported(.directory(directory), since: reports) else { return }
                if let now = Runtime.shared.monitor.identity(of: directory), now != identity {
                    Runtime.shared.registry.directoryChanged(path: directory, to: now)
                }
                cell.checkForExternalChange()
            case .store(let medium):
                if Runtime.shared.router.reported(.store(medium.identity), since: reports) {
                    cell.checkForExternalChange()
                }
            case .none:
                break
            }
        } else if case .observed(_, let target) = kind, target.attach(cell) {
            cell.checkForExternalChange()
        }
    }
}
