import Foundation
import WLStorageCore

/// Writing a directory's files durably, atomically and privately, and moving aside what a storage cannot read.
extension StorageDirectory {
    /// Replaces `name` with `contents`, atomically and durably, and returns the new file's identity: a 0600 temporary
    /// file (`O_EXCL|O_NOFOLLOW`) is locked, written in full, synced and closed, renamed over `name` (only a regular
    /// file is replaced), and the directory synced; on failure it is removed and the old file left. With `announced`,
    /// the monitor is told of the rename first (``OwnRenames``), so the writing storage does not read it back.
    @discardableResult
    package func write(_ name: String, contents: Data, announced: Bool = true) throws(WLStorageError) -> FileIdentity {
        try place(name, contents: contents, replacing: true, announced: announced)!
    }

    /// As ``write(_:contents:announced:)``, only while `name` is still the version `expected`
    /// (``exchange(_:with:in:ifStill:written:announced:unlock:)``); `nil` when another version stood there and is left.
    /// Without name exchange, a file placed between the check and the rename is still replaced.
    package func write(
        _ name: String, contents: Data, ifStill expected: FileIdentity, announced: Bool = true
    ) throws(WLStorageError) -> FileIdentity? {
        try place(name, contents: contents, replacing: true, announced: announced, ifStill: expected)
    }

    /// Creates `name` with `contents`, atomically and durably, unless something stands there (then `nil`); returns the
    /// new file's identity. Moved into place with `RENAME_NOREPLACE`, or `linkat` where unsupported.
    package func create(
        _ name: String, contents: Data, announced: Bool = true
    ) throws(WLStorageError) -> FileIdentity? {
        try place(name, contents: contents, replacing: false, announced: announced)
    }

    private func place(
        _ name: String, contents: Data, replacing: Bool, announced: Bool, ifStill expected: FileIdentity? = nil
    ) throws(WLStorageError) -> FileIdentity? {
        let dir = try openDirectory()
        defer { _ = closeDescriptor(dir, nil) }

        // Created and locked under the directory's shared lock; a name another writer has taken is drawn again.
        _ = retrying(.flock, nil) { flock(dir, LOCK_SH) }
        var temporary = Self.temporaryName(for: name)
        var fd: CInt = -1
        var openErrno: Int32 = 0
        for _ in 0..<8 {
            fd = retrying(.open, temporary) {
                openat(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            }
            openErrno = errno
            guard fd < 0, openErrno == EEXIST else { break }
            temporary = Self.temporaryName(for: name)
        }
        if fd >= 0 { _ = retrying(.flock, temporary) { flock(fd, LOCK_EX) } }
        _ = flock(dir, LOCK_UN)
        guard fd >= 0 else {
            throw error(.writeFailed, "cannot create a temporary file", name: temporary, errno: openErrno)
        }

        var placed = false
        var isOpen = true
        defer {
            if isOpen { _ = closeDescriptor(fd, temporary) }
            if !placed { _ = retrying(.unlink, temporary) { unlinkat(dir, temporary, 0) } }
        }

        let writeErrno = contents.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> Int32? in
            var offset = 0
            while offset < buffer.count {
                let written = retrying(.write, temporary) {
                    Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                }
                if written < 0 { return errno }
                offset += written
            }
            return nil
        }
        if let writeErrno {
            throw error(.writeFailed, "cannot write the file", name: temporary, errno: writeErrno)
        }
        // The version written, and the mode: set only when a umask took bits from 0600.
        var status = stat()
        guard retrying(.stat, temporary, { fstat(fd, &status) }) == 0 else {
            throw error(.writeFailed, "cannot inspect the written file", name: temporary, errno: errno)
        }
        if status.st_mode & 0o7777 != 0o600 {
            guard retrying(.chmod, temporary, { fchmod(fd, 0o600) }) == 0 else {
                throw error(.writeFailed, "cannot set the file mode", name: temporary, errno: errno)
            }
        }
        guard retrying(.fsync, temporary, { fsync(fd) }) == 0 else {
            throw error(.writeFailed, "cannot sync the file", name: temporary, errno: errno)
        }
        // Closed before the rename, so a failed close is reported under the temporary name. The directory's lock is
        // held until the file is in place, so a clean-up cannot remove it; exclusively for a conditional replacement,
        // so no other one exchanges files at the name meanwhile.
        let exchanging = replacing && expected != nil && SystemFunctions.renameat2 != nil
        var directoryLocked = retrying(.flock, nil) { flock(dir, exchanging ? LOCK_EX : LOCK_SH) } == 0
        func unlockDirectory() {
            if directoryLocked { _ = flock(dir, LOCK_UN) }
            directoryLocked = false
        }
        defer { unlockDirectory() }
        isOpen = false
        guard closeDescriptor(fd, temporary) == 0 else {
            throw error(.writeFailed, "cannot close the file", name: temporary, errno: errno)
        }
        let identity = FileIdentity(status)
        if replacing {
            let target = self.status(of: name, in: dir)
            let statErrno = errno
            if let target, (target.st_mode & S_IFMT) != S_IFREG {
                throw notRegular(name, EntryKind(mode: target.st_mode))
            }
            if let expected {
                // Not known to be another version when it cannot be looked at: an error, so the write is made again.
                if target == nil, statErrno != ENOENT {
                    throw error(.writeFailed, "cannot inspect the file in place", name: name, errno: statErrno)
                }
                guard let target, FileIdentity(target) == expected else { return nil }
                // The temporary name is the exchange's from here: it may come to hold another program's version.
                placed = true
                switch try exchange(
                    &temporary, with: name, in: dir, ifStill: expected, written: identity, announced: announced,
                    unlock: unlockDirectory)
                {
                case .replaced:
                    return identity
                case .gaveWay:
                    return nil
                case .unsupported:
                    placed = false
                }
            }
            if announced { OwnRenames.willRename(temporary) }
            guard retrying(.rename, name, { renameat(dir, temporary, dir, name) }) == 0 else {
                let code = errno
                OwnRenames.didNotRename(temporary)
                throw error(.writeFailed, "cannot rename the temporary file into place", name: name, errno: code)
            }
            placed = true
        } else {
            if announced { OwnRenames.willRename(temporary) }
            do {
                switch try moveWithoutReplacing(temporary, to: name, in: dir) {
                case .moved:
                    placed = true
                case .linked:
                    // Linked, not renamed: the temporary name goes before the directory sync, so one sync covers both.
                    OwnRenames.didNotRename(temporary)
                    _ = retrying(.unlink, temporary) { unlinkat(dir, temporary, 0) }
                    placed = true
                case .exists:
                    OwnRenames.didNotRename(temporary)
                    return nil
                }
            } catch {
                OwnRenames.didNotRename(temporary)
                throw error
            }
        }
        unlockDirectory()
        guard retrying(.fsync, nil, { fsync(dir) }) == 0 else {
            throw error(.writeFailed, "cannot sync the storage directory", errno: errno)
        }
        return identity
    }

    private enum NoReplaceOutcome { case moved, linked, exists }

    private enum ExchangeOutcome {
        /// The written file is in place, and the version it replaced is removed.
        case replaced
        /// Another version stood at the name: it is back in place (or a newer one is), and the written file is removed.
        case gaveWay
        /// The system or the file system cannot exchange two names: nothing was done.
        case unsupported
    }

    /// The most times a conditional replacement puts back what it displaced before it keeps it aside instead.
    private static let putBackLimit = 16

    /// Replaces `name` with the written file `temporary` only while `name` is the version `expected`, never losing
    /// another program's version: `renameat2(RENAME_EXCHANGE)` swaps the written file in and the displaced one out,
    /// where it is checked: the expected version is removed; another is exchanged back (or a newer one put in place)
    /// until the file taken back is ours or one put back before. A reader may briefly see the written file, never a
    /// loss. The written file first takes an exchange name (``exchangeName(for:replacing:with:)``), so clean-up
    /// restores a killed exchange (``resolveInterruptedExchange(_:in:)``).
    ///
    /// The caller holds the directory's lock exclusively until `unlock`: another exchange at the name could put back a
    /// version this one put back, which this one would then remove.
    private func exchange(
        _ temporary: inout String, with name: String, in dir: CInt, ifStill expected: FileIdentity,
        written: FileIdentity, announced: Bool, unlock: () -> Void
    ) throws(WLStorageError) -> ExchangeOutcome {
        guard let renameat2 = SystemFunctions.renameat2 else { return .unsupported }
        let exchanging = Self.exchangeName(for: name, replacing: expected, with: written)
        var renamed = retrying(.rename, exchanging) {
            renameat2(dir, temporary, dir, exchanging, SystemFunctions.renameNoReplace)
        }
        if renamed != 0, [EINVAL, ENOSYS, EOPNOTSUPP].contains(errno) {
            // No rename without replacing here: a plain rename, to a name the written version's stamp makes unique.
            renamed = retrying(.rename, exchanging) { renameat(dir, temporary, dir, exchanging) }
        }
        guard renamed == 0 else {
            // `EEXIST`: a dead writer's file with the same two versions, left for the clean-up.
            let code = errno
            _ = retrying(.unlink, temporary) { unlinkat(dir, temporary, 0) }
            throw error(.writeFailed, "cannot name the file for its exchange", name: exchanging, errno: code)
        }
        temporary = exchanging
        func finish(_ outcome: ExchangeOutcome) throws(WLStorageError) -> ExchangeOutcome {
            // Removed before the sync, so one sync covers the exchanges and the removal.
            _ = retrying(.unlink, exchanging) { unlinkat(dir, exchanging, 0) }
            unlock()
            guard retrying(.fsync, nil, { fsync(dir) }) == 0 else {
                throw error(.writeFailed, "cannot sync the storage directory", errno: errno)
            }
            return outcome
        }

        if announced { OwnRenames.willRename(exchanging) }
        if let code = swap(exchanging, name, in: dir, renameat2) {
            OwnRenames.didNotRename(exchanging)
            switch code {
            case EINVAL, ENOSYS, EOPNOTSUPP:
                return .unsupported
            case ENOENT:
                return try finish(.gaveWay)
            default:
                _ = retrying(.unlink, exchanging) { unlinkat(dir, exchanging, 0) }
                throw error(.writeFailed, "cannot exchange the file into place", name: name, errno: code)
            }
        }
        let first: FileIdentity?
        do {
            first = try displaced(exchanging, in: dir)
        } catch {
            throw keepDisplaced(exchanging, of: name, in: dir, error)
        }
        guard let first, first != expected else { return try finish(.replaced) }
        // Another program's version stored since the check: put back or kept aside, never removed unseen.
        do {
            try putBack(exchanging, holding: first, at: name, holding: written, in: dir, renameat2)
        } catch {
            throw keepDisplaced(exchanging, of: name, in: dir, error)
        }
        return try finish(.gaveWay)
    }

    /// Exchanges `first` and `second` in `dir` (`renameat2`, `RENAME_EXCHANGE`); the `errno` of a failure, or `nil`.
    private func swap(
        _ first: String, _ second: String, in dir: CInt, _ renameat2: SystemFunctions.Renameat2
    ) -> Int32? {
        let result = retrying(.rename, second) {
            renameat2(dir, first, dir, second, SystemFunctions.renameExchange)
        }
        return result == 0 ? nil : errno
    }

    /// The identity of what `entry` holds, or `nil` when nothing does.
    private func displaced(_ entry: String, in dir: CInt) throws(WLStorageError) -> FileIdentity? {
        guard let found = status(of: entry, in: dir) else {
            if errno == ENOENT { return nil }
            throw error(.writeFailed, "cannot inspect the file the rewrite replaced", name: entry, errno: errno)
        }
        return FileIdentity(found)
    }

    /// Puts `taken` (held by `holder`) back at `name`, which holds `placed`; while what comes back is newer than both,
    /// puts that in place instead. Returns when `holder` holds an older version or nothing, for the caller to remove.
    func putBack(
        _ holder: String, holding taken: FileIdentity, at name: String, holding placed: FileIdentity, in dir: CInt,
        _ renameat2: SystemFunctions.Renameat2
    ) throws(WLStorageError) {
        var (atName, atHolder) = (placed, taken)
        for _ in 0..<Self.putBackLimit {
            if let code = swap(holder, name, in: dir, renameat2) {
                // The file in place was removed after the version held was stored: that removal is the later change.
                guard code == ENOENT else {
                    throw error(.writeFailed, "cannot put back the file the write replaced", name: name, errno: code)
                }
                return
            }
            // What comes back is older than the file in place, unless renamed over it since: that goes in next.
            guard let taken = try displaced(holder, in: dir), taken != atName else { return }
            (atName, atHolder) = (atHolder, taken)
        }
        throw error(.writeFailed, "the file kept changing while the write gave way", name: name, errno: nil)
    }

    /// Moves a displaced version that could not be put back aside to a name the tool lists; returns `failure` with it.
    func keepDisplaced(
        _ temporary: String, of name: String, in dir: CInt, _ failure: WLStorageError
    ) -> WLStorageError {
        var failure = failure
        let aside = Self.movedAsideName(for: name)
        switch try? moveWithoutReplacing(temporary, to: aside, in: dir) {
        case .moved?, .linked?:
            _ = retrying(.fsync, nil) { fsync(dir) }
            failure.message += "; the version it displaced was kept as \(aside)"
        case .exists?, nil:
            failure.message += "; the version it displaced is left as \(temporary)"
        }
        return failure
    }

    /// Moves `source` to `target` unless it exists: `RENAME_NOREPLACE`, else `linkat` (the caller removes `source`).
    private func moveWithoutReplacing(
        _ source: String, to target: String, in dir: CInt
    ) throws(WLStorageError) -> NoReplaceOutcome {
        if let renameat2 = SystemFunctions.renameat2 {
            let result = retrying(.rename, target) {
                renameat2(dir, source, dir, target, SystemFunctions.renameNoReplace)
            }
            if result == 0 { return .moved }
            let code = errno
            if code == EEXIST { return .exists }
            guard code == EINVAL || code == ENOSYS || code == EOPNOTSUPP else {
                throw error(.writeFailed, "cannot move the file into place", name: target, errno: code)
            }
        }
        guard retrying(.link, target, { linkat(dir, source, dir, target, 0) }) == 0 else {
            let code = errno
            if code == EEXIST { return .exists }
            throw error(.writeFailed, "cannot link the file into place", name: target, errno: code)
        }
        return .linked
    }

    /// Moves `name` aside to a new "did not decode" name (never replacing one) and returns it. With `identity`, only if
    /// still that version (else `nil`); a file renamed into place meanwhile is moved back unless a newer one stands.
    package func moveAside(_ name: String, ifStill identity: FileIdentity? = nil) throws(WLStorageError) -> String? {
        let dir = try openDirectory()
        defer { _ = closeDescriptor(dir, nil) }
        if let identity, self.identity(of: name, in: dir) != identity { return nil }
        let aside = try moveOut(
            name, to: { Self.movedAsideName(for: name) }, ifStill: identity, in: dir,
            failing: "cannot find a free name to move the undecodable file aside")
        if aside != nil { _ = retrying(.fsync, nil) { fsync(dir) } }
        return aside
    }

    /// Moves `name` to the first of a few names `draw` gives where nothing stands, and returns it; only while `name` is
    /// `expected` when given: a file renamed into place since the check is moved back (`nil`) unless a newer one
    /// stands. Without no-replace renames, a file renamed in between the link and the unlink is still moved.
    private func moveOut(
        _ name: String, to draw: () -> String, ifStill expected: FileIdentity?, in dir: CInt, failing message: String
    ) throws(WLStorageError) -> String? {
        for _ in 0..<8 {
            let target = draw()
            switch try moveWithoutReplacing(name, to: target, in: dir) {
            case .exists:
                continue
            case .linked:
                if let expected, identity(of: target, in: dir) != expected {
                    _ = retrying(.unlink, target) { unlinkat(dir, target, 0) }
                    return nil
                }
                guard retrying(.unlink, name, { unlinkat(dir, name, 0) }) == 0 else {
                    let code = errno
                    _ = retrying(.unlink, target) { unlinkat(dir, target, 0) }
                    throw error(.writeFailed, "cannot move the file out of its place", name: name, errno: code)
                }
                return target
            case .moved:
                guard let expected, identity(of: target, in: dir) != expected else { return target }
                // Another program's version, renamed in since the check: back in place, unless a newer one is.
                switch try? moveWithoutReplacing(target, to: name, in: dir) {
                case .moved?:
                    break
                case .linked?, .exists?:
                    _ = retrying(.unlink, target) { unlinkat(dir, target, 0) }
                case nil:
                    // Kept under a name the tool lists, not left to the clean-up of temporary files.
                    if Self.isTemporary(target) {
                        _ = try? moveWithoutReplacing(target, to: Self.movedAsideName(for: name), in: dir)
                    }
                }
                _ = retrying(.fsync, nil) { fsync(dir) }
                return nil
            }
        }
        throw error(.writeFailed, message, name: name, errno: EEXIST)
    }

    /// What `fstatat` says of `entry` in `dir`, a symlink not followed; `nil`, with `errno` set, when it fails.
    func status(of entry: String, in dir: CInt) -> stat? {
        var status = stat()
        return retrying(.stat, entry, { fstatat(dir, entry, &status, AT_SYMLINK_NOFOLLOW) }) == 0 ? status : nil
    }

    /// The identity of the regular file `entry` in `dir`, or `nil` when there is none.
    func identity(of entry: String, in dir: CInt) -> FileIdentity? {
        guard let status = status(of: entry, in: dir), (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return FileIdentity(status)
    }

    /// Removes the regular file `name`. Returns `false` when there was none.
    @discardableResult
    package func remove(_ name: String) throws(WLStorageError) -> Bool {
        let dir = try openDirectory()
        defer { _ = closeDescriptor(dir, nil) }
        guard let status = status(of: name, in: dir) else {
            if errno == ENOENT { return false }
            throw error(.writeFailed, "cannot inspect the file", name: name, errno: errno)
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw notRegular(name, EntryKind(mode: status.st_mode)) }
        guard retrying(.unlink, name, { unlinkat(dir, name, 0) }) == 0 else {
            if errno == ENOENT { return false }
            throw error(.writeFailed, "cannot remove the file", name: name, errno: errno)
        }
        _ = retrying(.fsync, nil) { fsync(dir) }
        return true
    }

    /// Removes the regular file `name` only while it is `expected`; returns whether it did. Renamed to a temporary name
    /// and checked there (as ``moveAside(_:ifStill:)``), under the directory's shared lock so no clean-up removes it.
    package func remove(_ name: String, ifStill expected: FileIdentity) throws(WLStorageError) -> Bool {
        let dir = try openDirectory()
        defer { _ = closeDescriptor(dir, nil) }
        guard identity(of: name, in: dir) == expected else { return false }
        _ = retrying(.flock, nil) { flock(dir, LOCK_SH) }
        defer { _ = flock(dir, LOCK_UN) }
        guard
            let temporary = try moveOut(
                name, to: { Self.temporaryName(for: name) }, ifStill: expected, in: dir,
                failing: "cannot find a free temporary name to remove the file")
        else { return false }
        _ = retrying(.unlink, temporary) { unlinkat(dir, temporary, 0) }
        _ = retrying(.fsync, nil) { fsync(dir) }
        return true
    }
}
