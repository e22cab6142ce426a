/// A store that a ``WLStorage`` reads its value from once and writes it to in the background.
///
/// ``WLStorageDefaultBacker`` keeps each value in a JSON file. Conform to this protocol to keep values
/// anywhere else: a database row, a key-value service, memory in tests.
///
/// ``WLStorage`` calls ``read(defaultValueClosure:)`` once, from its initializer, and ``write(value:)`` from a
/// background thread, never twice at the same time for one storage. A backer shared by several storages must
/// do its own locking.
///
/// - Important: A backer must not call back into the storage it serves (``WLStorage/flush()`` waits for the write
///   that is calling it), nor end the program with `exit()` from ``write(value:)``: the exit flush would wait for
///   that same write.
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
    /// When the backer calls `defaultValueClosure`, the storage treats the default as a change and writes it
    /// back, so the default is saved as it is in the reference library.
    ///
    /// - Parameter defaultValueClosure: Makes the default value. Call it only when nothing is stored.
    /// - Returns: The stored value or the default.
    /// - Throws: When the stored value exists but cannot be read. The storage then starts from the default
    ///   and does not write it back.
    func read(defaultValueClosure: () -> T) throws -> T

    /// Stores `value`, replacing what was stored.
    ///
    /// - Parameter value: The value to store.
    /// - Throws: When the value could not be stored. The storage keeps it pending and calls again later.
    func write(value: T) throws
}
