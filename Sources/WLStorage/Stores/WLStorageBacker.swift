/// A store that a ``WLStorage`` reads its value from once and writes it to in the background.
///
/// ``WLStorageDefaultBacker`` keeps each value in a JSON file. Conform to this protocol to keep values
/// anywhere else: a database row, a key-value service, memory in tests.
///
/// ``WLStorage`` calls ``read(defaultValueClosure:)`` from its initializer (and again before its first write when
/// that read failed), and ``write(value:)`` from a background thread, never two calls at the same time for one
/// storage. A backer shared by several storages must do its own locking.
///
/// - Important: A backer must not flush the storage it serves (``WLStorage/flush()`` would wait for the write that
///   is calling it; it returns at once and reports ``WLStorageError/Code/reentrantCall``), nor end the program with
///   `exit()` from ``write(value:)``: the exit flush would wait for that same write.
///
/// Both requirements may throw. A backer written without `throws`, like the reference library's, conforms as
/// it is. What a backer throws is wrapped in a ``WLStorageError`` with the code
/// ``WLStorageError/Code/backerFailed`` (unless it already is one) and reported; a failed write leaves the value
/// pending, and it is written again at the next tick or ``WLStorage/flush()``.
///
/// ```swift
/// final class MemoryBacker<T: Codable & Sendable>: WLStorageBacker, Sendable {
///     let key: String
///     private let stored = Mutex<T?>(nil)
///     init(key: String) { self.key = key }
///     func read(defaultValueClosure: () -> T) -> T { stored.withLock { $0 } ?? defaultValueClosure() }
///     func write(value: T) { stored.withLock { $0 = value } }
/// }
/// ```
public protocol WLStorageBacker<T>: Sendable {
    /// The type of the stored value.
    associatedtype T: Codable & Sendable

    /// The key the value is stored under.
    var key: String { get }

    /// Returns the stored value, or the result of `defaultValueClosure` when nothing is stored.
    ///
    /// When the backer calls `defaultValueClosure`, the storage knows that nothing is stored. It uses the default
    /// but does not write it: a default is not a change, and only changes are written to a custom backer.
    ///
    /// - Parameter defaultValueClosure: Makes the default value. Call it only when nothing is stored.
    /// - Returns: The stored value or the default.
    /// - Throws: When the stored value exists but cannot be read. The storage then starts from the default, and
    ///   before its first write it calls this method again: a value found then wins over the changes made in the
    ///   meantime, which were based on the default and are dropped (``WLStorageError/Code/changeDiscarded``).
    func read(defaultValueClosure: () -> T) throws -> T

    /// Stores `value`, replacing what was stored.
    ///
    /// - Parameter value: The value to store.
    /// - Throws: When the value could not be stored. The storage keeps it pending and calls again later.
    func write(value: T) throws
}

/// A backer that can tell when its stored value was changed elsewhere: by another program, another machine, or
/// another backer of the same place.
///
/// The storage starts the feed before its first read and keeps it until its value is released. When the backer
/// reports a change, the storage reads the backer again (on a background thread, as any other call) and adopts what
/// it finds by the same rule as a file changed by another program: a local change still pending wins, and is written
/// over it; otherwise the value read replaces the one in memory, and Observation, `values` and `onChange` are told.
/// A read that returns the value this backer last wrote or read (compared by its JSON encoding) is not a change, so
/// reporting the backer's own writes, or a change that was not one, costs a read and nothing else.
///
/// ```swift
/// final class SharedMemoryBacker: WLStorageObservableBacker, Sendable {
///     let key: String
///     let board: Board  // a store of your own that calls its subscribers when a key changes
///     init(key: String, board: Board) { self.key = key; self.board = board }
///     func read(defaultValueClosure: () -> Int) -> Int { board.value(of: key) ?? defaultValueClosure() }
///     func write(value: Int) { board.set(key, value) }
///     func observeChanges(_ changed: @escaping @Sendable () -> Void) -> WLStorageSubscription {
///         let id = board.subscribe(key, changed)
///         return WLStorageSubscription { [board] in board.unsubscribe(id) }
///     }
/// }
/// ```
public protocol WLStorageObservableBacker<T>: WLStorageBacker {
    /// Starts calling `changed`, from any thread and outside the backer's own locks, whenever the stored value may
    /// have been changed elsewhere, until the returned observation is cancelled or released.
    func observeChanges(_ changed: @escaping @Sendable () -> Void) -> WLStorageSubscription
}
