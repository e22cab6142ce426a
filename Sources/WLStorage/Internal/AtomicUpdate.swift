import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The calling thread, as cells record the thread that runs a job or an update.
@usableFromInline
func currentThread() -> UInt {
    UInt(bitPattern: Int(bitPattern: pthread_self()))
}

extension CellState {
    /// Whether `thread` is running an `update` of this cell.
    @usableFromInline
    func isUpdating(on thread: UInt) -> Bool {
        extras?.updatingThreads.contains(thread) ?? false
    }

    /// Counts `thread` as running an update; returns `false`, counting nothing, when it runs one already.
    mutating func beginUpdate(on thread: UInt) -> Bool {
        if updating, isUpdating(on: thread) { return false }
        withExtras { $0.updatingThreads.append(thread) }
        updating = true
        return true
    }

    mutating func endUpdate(on thread: UInt) {
        guard let extras, let index = extras.updatingThreads.firstIndex(of: thread) else { return }
        extras.updatingThreads.remove(at: index)
        updating = !extras.updatingThreads.isEmpty
    }
}

extension StorageCell {
    /// Runs `body` on the value and stores what it leaves, atomically: no change made meanwhile, by a set, another
    /// update or an outside change adopted, is lost.
    ///
    /// `body` runs on a copy, outside every lock of the package, so that it may read this storage, flush it, or use
    /// any other. The copy is stored only if the value is still the one it started from; otherwise `body` runs
    /// again, on the new value. A change to this very storage from inside `body` would make that go on forever, so
    /// it is refused and reported (``WLStorageError/Code/reentrantCall``), and `body`'s result is stored.
    func update<R>(_ body: (inout T) throws -> R) rethrows -> R {
        if fileBacker == nil, let storeBacker = backer as? StoreBacker<T>,
            let store = storeBacker.store as? any WLStorageConditionalStore
        {
            return try updateShared(body, storeBacker: storeBacker, store: store)
        }
        return try updateInProcess(body)
    }

    /// The update of a value in this process only (see ``update(_:)``).
    private func updateInProcess<R>(_ body: (inout T) throws -> R) rethrows -> R {
        let thread = currentThread()
        var attempts = 0
        while true {
            let started = state.withLock { state -> (value: T, count: UInt32)? in
                guard state.beginUpdate(on: thread) else { return nil }
                return (state.value, state.changeCount)
            }
            guard let (start, count) = started else {
                // An update of this storage from inside an update of it.
                var copy = get()
                refuseChangeInsideUpdate(what: "update")
                return try body(&copy)
            }
            var value = start
            let result: R
            do {
                result = try body(&value)
            } catch {
                state.withLock { $0.endUpdate(on: thread) }
                throw error
            }
            if commit(&value, ifUnchangedSince: count, thread: thread) { return result }
            attempts += 1
            // Others keep changing the value: give them the processor for a moment rather than spin.
            if attempts > 2 { sched_yield() }
        }
    }

    /// The update of a value in a store that writes on condition (``WLStorageConditionalStore``): atomic for every
    /// process that shares the store.
    ///
    /// A change of this process still pending is written first, so that the update starts from it. Then the key is
    /// read, `body` runs on its value, and the result is stored only while the key holds what was read; when someone
    /// stored something else meanwhile, all of it runs again. The cell takes the result as written, unless it changed
    /// meanwhile (a set, which is newer and will be written, or a newer value adopted). When the store cannot be
    /// reached, or holds what does not decode, the update is made in this process only, as a set, and reported.
    private func updateShared<R>(
        _ body: (inout T) throws -> R, storeBacker: StoreBacker<T>, store: any WLStorageConditionalStore
    ) rethrows -> R {
        let thread = currentThread()
        guard flush() == .done else {
            return try updateInProcess(body)
        }
        var attempts = 0
        while true {
            let started = state.withLock { state -> UInt32? in
                guard state.beginUpdate(on: thread) else { return nil }
                return state.changeCount
            }
            guard let count = started else {
                var copy = get()
                refuseChangeInsideUpdate(what: "update")
                return try body(&copy)
            }
            let read: (bytes: Data?, value: T)
            do {
                read = try readForUpdate(storeBacker)
            } catch {
                state.withLock { $0.endUpdate(on: thread) }
                record(error)
                return try updateInProcess(body)
            }
            var value = read.value
            let result: R
            let data: Data
            do {
                result = try body(&value)
            } catch {
                state.withLock { $0.endUpdate(on: thread) }
                throw error
            }
            do {
                data = try storeBacker.encode(value)
            } catch {
                // The result cannot be stored: it is kept in memory, as a set of it would be, and reported by the
                // write that fails.
                state.withLock { $0.endUpdate(on: thread) }
                return try updateInProcess(body)
            }
            let stored: Bool
            do {
                stored = try store.write(key: storeBacker.storedKey, data: data, ifItHolds: read.bytes)
            } catch {
                state.withLock { $0.endUpdate(on: thread) }
                record(
                    WLStorageError(
                        code: .writeFailed,
                        message: "the update could not be stored in \(storeBacker.identity), so it was made in this"
                            + " process only and is written as a set is: \(error)",
                        key: backer.key, underlying: error))
                return try updateInProcess(body)
            }
            guard stored else {
                state.withLock { $0.endUpdate(on: thread) }
                attempts += 1
                if attempts > 2 { sched_yield() }
                continue
            }
            storeBacker.wrote(data)
            adopt(&value, writtenSince: count, thread: thread)
            return result
        }
    }

    /// The key's bytes and their value (the default when it holds nothing), for an update.
    private func readForUpdate(_ storeBacker: StoreBacker<T>) throws(WLStorageError) -> (bytes: Data?, value: T) {
        let bytes: Data?
        do {
            bytes = try storeBacker.store.read(key: storeBacker.storedKey)
        } catch {
            throw WLStorageError(
                code: .readFailed,
                message: "the update could not read \(storeBacker.identity), so it was made in this process only and"
                    + " is written as a set is: \(error)",
                key: backer.key, underlying: error)
        }
        guard let bytes, !bytes.isEmpty else { return (bytes, defaultValue) }
        do {
            return (bytes, try decoding.value(of: bytes))
        } catch {
            throw WLStorageError(
                code: .decodingFailed,
                message: "the update found bytes in \(storeBacker.identity) that"
                    + " \(ValueDecoding<T>.judge(bytes, migrationFailures: error.migrationFailures)), so it was made"
                    + " in this process only and is written as a set is",
                key: backer.key, underlying: error.error)
        }
    }

    /// Takes `value`, just stored by an update, as the cell's value and as written, unless the cell's value changed
    /// since `count`; ends the update of `thread`.
    private func adopt(_ value: inout T, writtenSince count: UInt32, thread: UInt) {
        registrar.withMutation(of: self, keyPath: valueKeyPath) {
            let drain = state.withLock { state -> Bool in
                state.endUpdate(on: thread)
                guard state.changeCount == count, !state.isPending else { return false }
                swap(&state.value, &value)
                state.changeCount &+= 1
                state.stored = .known
                return state.hasListeners && state.queueNotification()
            }
            if drain { drainNotifications() }
        }
    }

    /// Stores `value` if the value is unchanged since `count`, and ends the update of `thread`. Returns whether it
    /// stored it. Whatever value leaves the lock (the one replaced, or `value` when it is not stored) is released
    /// after it.
    private func commit(_ value: inout T, ifUnchangedSince count: UInt32, thread: UInt) -> Bool {
        // A change since the closure began is likely under contention: no observer is told of a mutation for nothing.
        let unchanged = state.withLock { state in
            if state.changeCount == count { return true }
            state.endUpdate(on: thread)
            return false
        }
        guard unchanged else { return false }
        return registrar.withMutation(of: self, keyPath: valueKeyPath) {
            let outcome = state.withLock { state -> (needsTick: Bool, drain: Bool)? in
                state.endUpdate(on: thread)
                guard state.changeCount == count else { return nil }
                swap(&state.value, &value)
                state.version &+= 1
                state.changeCount &+= 1
                return (state.throttle.needsTick, state.hasListeners && state.queueNotification())
            }
            guard let (needsTick, drain) = outcome else { return false }
            if drain { drainNotifications() }
            if needsTick { armTick() }
            return true
        }
    }

    /// Reports a set or an update of this storage from inside an update of it, which is not made.
    @usableFromInline
    func refuseChangeInsideUpdate(what: String) {
        record(
            WLStorageError(
                code: .reentrantCall,
                message: "\(what) was called on this storage from inside its own update, whose result replaces the"
                    + " value; the \(what) was not made. Change the value through the closure's argument",
                key: backer.key))
    }
}
