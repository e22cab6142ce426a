import Foundation

/// The storage directories in use in this process: one record per directory path while a backer uses it.
///
/// A record shares the path string among the backers of a directory, and remembers that the directory was prepared
/// (created, its parents synced, abandoned temporary files removed) and what it is (its identity), so that this is
/// done once per process. When the last backer of a directory goes, so does its record: a process that uses many
/// directories over its life keeps nothing of those it no longer uses.
///
/// The lock guards the records only; no other lock is taken and no user code runs under it.
package enum DirectoryTable {
    private struct Record {
        let directory: StorageDirectory
        var backers: Int
        /// The directory's identity, once it has been prepared; `nil` until then, or after ``forget(_:)``.
        var identity: DirectoryIdentity?
    }

    private static let records = Lock<[String: Record]>([:])

    /// The directory at `url`, standardized (`a/../b` is `b`), with its path string shared by every backer that
    /// names it. Balance each call with ``release(_:)``.
    package static func directory(for url: URL) -> StorageDirectory {
        let path = url.standardizedFileURL.path
        return records.withLock { records in
            if let record = records[path] {
                records[path]?.backers += 1
                return record.directory
            }
            let directory = StorageDirectory(path: path)
            records[path] = Record(directory: directory, backers: 1)
            return directory
        }
    }

    /// Ends one use of `directory` begun by ``directory(for:)``.
    package static func release(_ directory: StorageDirectory) {
        records.withLock { records in
            guard let backers = records[directory.path]?.backers else { return }
            if backers <= 1 {
                records[directory.path] = nil
            } else {
                records[directory.path]?.backers = backers - 1
            }
        }
    }

    /// Creates `directory` when it is missing, syncs its parents and removes abandoned temporary files, once per
    /// process, and returns its identity.
    package static func prepare(_ directory: StorageDirectory) throws(WLStorageError) -> DirectoryIdentity {
        if let identity = records.withLock({ $0[directory.path]?.identity }) { return identity }
        let identity = try directory.create()
        try directory.removeAbandonedTemporaryFiles()
        records.withLock { records in
            if records[directory.path] != nil { records[directory.path]?.identity = identity }
        }
        return identity
    }

    /// The identity of `directory` as last prepared, if it was.
    package static func identity(of directory: StorageDirectory) -> DirectoryIdentity? {
        records.withLock { $0[directory.path]?.identity }
    }

    /// Makes the next ``prepare(_:)`` of `directory` do its work again: the directory was removed, or its path now
    /// leads to another directory.
    package static func forget(_ directory: StorageDirectory) {
        records.withLock { records in
            if records[directory.path] != nil { records[directory.path]?.identity = nil }
        }
    }

    /// The number of directories in use (for tests).
    package static var count: Int {
        records.withLock { $0.count }
    }
}
