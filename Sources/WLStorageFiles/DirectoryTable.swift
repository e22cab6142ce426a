import Foundation
import WLStorageCore

/// The storage directories in use: one record per path while a backer uses it, sharing its path string and remembering
/// that it was prepared and its identity, so preparation is once per process. The lock guards the records only.
package enum DirectoryTable {
    struct Record {
        var backers: Int
        /// The directory's identity, once it has been prepared; `nil` until then, or after ``forget(_:)``.
        var identity: DirectoryIdentity?
        /// Whether preparation left the removal of abandoned temporary files to a job waiting for the directory's lock.
        var cleanUpPending = false
        /// The URLs standardized to this path, so the next backer of one skips that work.
        var urls: Set<URLText> = []
    }

    /// A URL by its text's bytes: two URLs Swift holds equal can name two directories.
    typealias URLText = StorageDirectory

    /// Records by directory path, compared as bytes (see ``StorageDirectory``).
    struct Records {
        var byPath: [StorageDirectory: Record] = [:]
        var pathOfURL: [URLText: StorageDirectory] = [:]
        /// The URL named last and its record's path, while that has a record.
        var last: (url: String, path: StorageDirectory)?
    }

    /// The directory at `url`, standardized, its path string shared by its backers. Balance with ``release(_:)``.
    package static func directory(for url: URL) -> StorageDirectory {
        let string = url.absoluteString
        let known = FileSystemState.shared.directories.withLock { state -> StorageDirectory? in
            // Backers made in a row name one URL: the last one named is found without hashing its text.
            let path = state.last?.url == string ? state.last?.path : state.pathOfURL[URLText(path: string)]
            guard let path, let index = state.byPath.index(forKey: path) else { return nil }
            state.byPath.values[index].backers += 1
            state.last = (string, state.byPath.keys[index])
            return state.byPath.keys[index]
        }
        if let known { return known }
        let text = URLText(path: string)
        let path = StorageDirectory(path: url.standardizedFileURL.path)
        return FileSystemState.shared.directories.withLock { state in
            state.pathOfURL[text] = path
            state.byPath[path, default: Record(backers: 0)].backers += 1
            let index = state.byPath.index(forKey: path)!  // there now
            state.byPath.values[index].urls.insert(text)
            state.last = (string, state.byPath.keys[index])
            return state.byPath.keys[index]
        }
    }

    /// Ends one use of `directory` begun by ``directory(for:)``.
    package static func release(_ directory: StorageDirectory) {
        FileSystemState.shared.directories.withLock { state in
            guard let record = state.byPath[directory] else { return }
            if record.backers <= 1 {
                state.byPath[directory] = nil
                if state.last?.path == directory { state.last = nil }
                for url in record.urls { state.pathOfURL[url] = nil }
            } else {
                state.byPath[directory]?.backers = record.backers - 1
            }
        }
    }

    /// Creates `directory` if missing, syncs its parents and removes abandoned temporary files, once per process;
    /// returns its identity. Without `waiting`, a removal blocked by another's lock is left to a job, and the next
    /// preparation with `waiting` (a write) does it first, so nothing this process writes comes before it.
    package static func prepare(
        _ directory: StorageDirectory, waiting: Bool = true
    ) throws(WLStorageError) -> DirectoryIdentity {
        let known = FileSystemState.shared.directories.withLock { state in
            state.byPath[directory].map { ($0.identity, $0.cleanUpPending) }
        }
        if case let (identity?, pending)? = known {
            if pending && waiting { removeAbandonedTemporaryFiles(in: directory) }
            return identity
        }
        let identity = try directory.create()
        let pending = try directory.removeAbandonedTemporaryFiles(waiting: waiting) == nil
        FileSystemState.shared.directories.withLock { state in
            state.byPath[directory]?.identity = identity
            state.byPath[directory]?.cleanUpPending = pending
        }
        if pending, FileSystemState.shared.cleanUpsWaiting.withLock({ $0.insert(directory).inserted }) {
            FileSystemState.shared.cleanUps.async {
                removeAbandonedTemporaryFiles(in: directory)
                FileSystemState.shared.cleanUpsWaiting.withLock { _ = $0.remove(directory) }
            }
        }
        return identity
    }

    /// The removal of abandoned temporary files that a preparation left to later, waiting for the directory's lock.
    private static func removeAbandonedTemporaryFiles(in directory: StorageDirectory) {
        // A directory that cannot be listed now is retried by the next preparation with `waiting`.
        guard (try? directory.removeAbandonedTemporaryFiles()) != nil else { return }
        FileSystemState.shared.directories.withLock { $0.byPath[directory]?.cleanUpPending = false }
    }

    package static func identity(of directory: StorageDirectory) -> DirectoryIdentity? {
        FileSystemState.shared.directories.withLock { $0.byPath[directory]?.identity }
    }

    /// Makes the next ``prepare(_:)`` of `directory` work again (removed, or its path leads elsewhere).
    package static func forget(_ directory: StorageDirectory) {
        FileSystemState.shared.directories.withLock { $0.byPath[directory]?.identity = nil }
    }

    /// The number of directories in use (for tests).
    package static var count: Int { FileSystemState.shared.directories.withLock { $0.byPath.count } }
}
