/// A store that a ``WLStorage`` reads its value from once and writes it to in the background.
///
/// ``WLStorage`` calls ``read(defaultValueClosure:)`` from its initializer (again before its first write if that
/// failed) and ``write(value:)`` from a background thread, never two calls at once for one storage; a backer shared by
/// several storages does its own locking. What it throws is reported as ``WLStorageError/Code/backerFailed`` (unless a
/// ``WLStorageError``); a failed write stays pending.
///
/// - Important: A backer must not flush the storage it serves (reported as ``WLStorageError/Code/reentrantCall``), nor
///   call `exit()` from ``write(value:)``: the exit flush would wait for that same write.
///
/// See <doc:CustomBackers> for backers of your own.
public protocol WLStorageBacker<T>: Sendable {
    /// The type of the stored value.
    associatedtype T: Codable & Sendable

    /// The key the value is stored under.
    var key: String { get }

    /// Returns the stored value, or the result of `defaultValueClosure` when nothing is stored (it is not written).
    ///
    /// - Parameter defaultValueClosure: Makes the default value. Call it only when nothing is stored.
    /// - Returns: The stored value or the default.
    /// - Throws: When the stored value exists but cannot be read. The storage starts from the default and reads again
    ///   before its first write; a value found then wins over the changes made meanwhile
    ///   (``WLStorageError/Code/changeDiscarded``).
    func read(defaultValueClosure: () -> T) throws -> T

    /// Stores `value`, replacing what was stored.
    ///
    /// - Parameter value: The value to store.
    /// - Throws: When the value could not be stored. The storage keeps it pending and calls again later.
    func write(value: T) throws
}

/// A backer that can tell when its stored value was changed elsewhere.
///
/// The storage starts the feed before its first read and keeps it until its value is released. On a report it reads the
/// backer again and adopts the value as for a file changed by another program (a pending local change wins). A read
/// equal to what the backer last wrote or read is not a change. See <doc:CustomBackers> for an example.
public protocol WLStorageObservableBacker<T>: WLStorageBacker {
    /// Starts calling `changed`, from any thread and outside the backer's own locks, whenever the stored value may
    /// have been changed elsewhere, until the returned observation is cancelled or released.
    func observeChanges(_ changed: @escaping @Sendable () -> Void) -> WLStorageSubscription
}

extension WLStorageBacker {
    /// Reads the backer as any backer is read, telling a stored value from `makeDefault`'s by whether it asked for it.
    func readResult(defaultValue makeDefault: () -> T) -> ReadResult<T> {
        var askedForDefault = false
        do {
            let value = try read {
                askedForDefault = true
                return makeDefault()
            }
            return askedForDefault ? .absent : .value(value)
        } catch {
            return .failed(WLStorageError(wrapping: error, key: key))
        }
    }
}
