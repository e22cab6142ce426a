import Foundation
import WLStorageCore

/// What a directory's first use in a process clears: dead writers' temporary files and interrupted exchanges.
extension StorageDirectory {
    /// Whether a shared lock of the directory cannot be had now (an exchange or a clean-up holds it exclusively): an
    /// exchange's file (``exchangeName(for:replacing:with:)``) is a working writer's only while this is `true`.
    package func isLockedExclusively() -> Bool {
        guard let dir = try? openDirectory() else { return false }
        defer { _ = closeDescriptor(dir, nil) }
        guard flock(dir, LOCK_SH | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        _ = flock(dir, LOCK_UN)
        return false
    }

    /// Removes the temporary files of writers no longer at work (regular files of the writers' names that no writer
    /// locks), and returns their names. A dead exchange's file is resolved (``resolveInterruptedExchange(_:in:)``).
    @discardableResult
    package func removeAbandonedTemporaryFiles() throws(WLStorageError) -> [String] {
        try removeAbandonedTemporaryFiles(waiting: true) ?? []
    }

    /// As ``removeAbandonedTemporaryFiles()``; without `waiting`, `nil` rather than wait for another's lock.
    package func removeAbandonedTemporaryFiles(waiting: Bool) throws(WLStorageError) -> [String]? {
        let candidates = try entries { $0.contains(UInt8(ascii: "~")) }.filter(Self.isTemporary)
        guard !candidates.isEmpty else { return [] }
        let dir = try openDirectory()
        defer { _ = closeDescriptor(dir, nil) }
        let locked = retrying(.flock, nil) { flock(dir, waiting ? LOCK_EX : LOCK_EX | LOCK_NB) } == 0
        if !locked, !waiting, errno == EWOULDBLOCK { return nil }
        defer { _ = flock(dir, LOCK_UN) }
        var removed: [String] = []
        for name in candidates {
            // No exchange at work has such a name: each holds the directory's lock exclusively, as this clean-up does.
            if Self.interruptedExchange(name) != nil {
                if resolveInterruptedExchange(name, in: dir) { removed.append(name) }
                continue
            }
            let fd = retrying(.open, name) {
                openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
            }
            guard fd >= 0 else { continue }
            defer { _ = closeDescriptor(fd, name) }
            var status = stat()
            guard retrying(.stat, name, { fstat(fd, &status) }) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
                continue
            }
            // A writer at work holds this lock; a dead one released it when it died.
            if flock(fd, LOCK_EX | LOCK_NB) == 0, retrying(.unlink, name, { unlinkat(dir, name, 0) }) == 0 {
                removed.append(name)
            }
        }
        if !removed.isEmpty { _ = retrying(.fsync, nil) { fsync(dir) } }
        return removed
    }

    /// Resolves a dead exchange's file `entry` (the caller holds the directory's lock exclusively: no writer is at
    /// work); returns whether it is gone. The written or expected version is removed; another program's is put back
    /// while the written one is in place, else removed as older; what cannot be looked at or put back stays or is kept.
    private func resolveInterruptedExchange(_ entry: String, in dir: CInt) -> Bool {
        guard let (name, expected, written) = Self.interruptedExchange(entry), let held = identity(of: entry, in: dir)
        else { return false }
        func remove() -> Bool { retrying(.unlink, entry) { unlinkat(dir, entry, 0) } == 0 }
        if held.lastingStamp == written || held.lastingStamp == expected { return remove() }

        guard let target = status(of: name, in: dir) else {
            // Removed since: a later change. A file that cannot be looked at is left as it is.
            return errno == ENOENT ? remove() : false
        }
        guard (target.st_mode & S_IFMT) == S_IFREG else { return false }
        let placed = FileIdentity(target)
        guard placed.lastingStamp == written else { return remove() }
        guard let renameat2 = SystemFunctions.renameat2 else { return false }
        do {
            try putBack(entry, holding: held, at: name, holding: placed, in: dir, renameat2)
        } catch {
            _ = keepDisplaced(entry, of: name, in: dir, error)
            return false
        }
        _ = remove()
        return true
    }
}
