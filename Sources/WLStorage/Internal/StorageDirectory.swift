import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One version of a file on disk: its device and inode numbers, size and modification time. An atomic replace
/// makes a new inode; a write in place changes the size or the time.
package struct FileIdentity: Hashable, Sendable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    package var modified: timespec

    init(_ status: stat) {
        self.device = UInt64(status.st_dev)
        self.inode = UInt64(status.st_ino)
        self.size = Int64(status.st_size)
        self.modified = status.st_mtim
    }

    /// A number that stands for this version, for keeping many versions small: equal versions have equal stamps,
    /// and different ones differ but for a chance of one in 2^64.
    package var stamp: Int {
        hashValue
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        (lhs.device, lhs.inode, lhs.size, lhs.modified.tv_sec, lhs.modified.tv_nsec)
            == (rhs.device, rhs.inode, rhs.size, rhs.modified.tv_sec, rhs.modified.tv_nsec)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(device)
        hasher.combine(inode)
        hasher.combine(size)
        hasher.combine(modified.tv_sec)
        hasher.combine(modified.tv_nsec)
    }
}

/// What kind of entry stands at a name.
package enum EntryKind: String, Sendable {
    case regularFile = "regular file"
    case symlink
    case directory
    case special = "special file"

    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regularFile
        case S_IFLNK: self = .symlink
        case S_IFDIR: self = .directory
        default: self = .special
        }
    }
}

/// What `lstat` says of one entry in a storage directory.
package struct FileStatus: Sendable {
    package var identity: FileIdentity
    package var kind: EntryKind
    package var isRegularFile: Bool { kind == .regularFile }
    package var size: Int64
    package var modificationTime: Date
}

/// A storage directory and every file operation the package does in it, with POSIX calls.
///
/// The directory is opened afresh for each operation that changes it (`open` with `O_DIRECTORY`), and files are
/// reached relative to that descriptor; reads open the file by its path. Either way the last component is opened
/// with `O_NOFOLLOW` or checked with `lstat`, so a symlink where a file should be is never followed. Symlinks in the
/// directory's own path are followed, as for any path a program is given. Writes go through a temporary file that is created exclusively with mode 0600, written in full,
/// synced, and renamed over the file, after which the directory is synced.
///
/// Temporary files are named `NAME~RANDOM.tmp`. A writer holds an exclusive `flock` on its temporary file
/// until it has renamed it; it creates and locks the file while holding a shared `flock` on the directory.
/// Clean-up holds the directory's exclusive lock and removes only temporary files it can lock itself, so it
/// never removes the file of a writer still at work, in this process or another.
package struct StorageDirectory: Sendable, Hashable {
    /// The directory's absolute path.
    package let path: String

    package init(path: String) {
        self.path = path
    }

    private static let interned = Lock<[URL: StorageDirectory]>([:])

    /// The directory at `url`, standardized, with its path string shared by every caller that names it.
    package static func shared(for url: URL) -> StorageDirectory {
        if let known = interned.withLock({ $0[url] }) { return known }
        let directory = StorageDirectory(path: url.standardizedFileURL.path)
        return interned.withLock { interned in
            if let known = interned[url] { return known }
            interned[url] = directory
            return directory
        }
    }

    // MARK: Names

    /// Whether `name` is a temporary file left by a writer.
    package static func isTemporary(_ name: String) -> Bool {
        name.contains("~") && name.hasSuffix(".tmp")
    }

    /// Whether `name` is a file moved aside because it did not decode.
    package static func isMovedAside(_ name: String) -> Bool {
        name.contains("~corrupt-")
    }

    static func temporaryName(for name: String) -> String {
        "\(name)~\(randomHex(8)).tmp"
    }

    static func movedAsideName(for name: String, at date: Date = Date()) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec)
        return "\(name)~corrupt-\(stamp)-\(randomHex(2))"
    }

    private static func randomHex(_ bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte, radix: 16).leftPadded(to: 2)
        }.joined()
    }

    // MARK: Directory

    /// Creates the directory and any missing parents with mode 0700. Existing directories are left as they are.
    package func create() throws(WLStorageError) {
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            let parent = prefix.isEmpty ? "/" : prefix
            prefix += "/" + component
            if mkdir(prefix, 0o700) == 0 {
                // The umask may have taken bits away; the directory must be 0700 whatever it is. Syncing the parent
                // makes the new entry durable, so that the first file written in it does not vanish with it.
                _ = chmod(prefix, 0o700)
                let parentDescriptor = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                if parentDescriptor >= 0 {
                    _ = retryingEINTR { fsync(parentDescriptor) }
                    close(parentDescriptor)
                }
                continue
            }
            let code = errno
            guard code == EEXIST else {
                throw error(.directoryUnavailable, "cannot create the storage directory", path: prefix, errno: code)
            }
        }
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw error(.directoryUnavailable, "cannot open the storage directory", errno: errno)
        }
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw error(.directoryUnavailable, "the storage directory path is not a directory", errno: ENOTDIR)
        }
    }

    private func openDirectory() throws(WLStorageError) -> CInt {
        let fd = retryingEINTR { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else {
            throw error(.directoryUnavailable, "cannot open the storage directory", errno: errno)
        }
        return fd
    }

    // MARK: Read

    /// The contents of `name`, or `nil` when there is no such file.
    ///
    /// - Throws: ``WLStorageError/Code/notARegularFile`` for a symlink, a directory or any other non-regular
    ///   file (none of which is followed or opened for reading); ``WLStorageError/Code/readFailed`` otherwise.
    package func read(_ name: String) throws(WLStorageError) -> Data? {
        try readVersion(name)?.contents
    }

    /// The contents of `name` and the identity of the version read, or `nil` when there is no such file.
    ///
    /// - Throws: As ``read(_:)``.
    package func readVersion(_ name: String) throws(WLStorageError) -> (contents: Data, identity: FileIdentity)? {
        // O_NOFOLLOW refuses a symlink as the last component; O_NONBLOCK keeps a FIFO from blocking the open.
        let fd = retryingEINTR { open(filePath(name), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            if let status = status(of: name), !status.isRegularFile { throw notRegular(name, status.kind) }
            throw error(.readFailed, "cannot open the file", name: name, errno: code)
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw error(.readFailed, "cannot inspect the file", name: name, errno: errno)
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw notRegular(name, EntryKind(mode: status.st_mode))
        }
        // The size `fstat` gave is read and no more: the package's writers replace files whole, so a file that was
        // ours to read does not change under us. A file written in place meanwhile is read again on its next event.
        let size = max(0, Int(status.st_size))
        var data = Data(count: max(size, 1))
        var filled = 0
        while size == 0 || filled < size {
            if filled == data.count { data.count += max(4_096, data.count) }
            let count = data.withUnsafeMutableBytes { buffer in
                retryingEINTR { Glibc.read(fd, buffer.baseAddress! + filled, buffer.count - filled) }
            }
            if count < 0 {
                throw error(.readFailed, "cannot read the file", name: name, errno: errno)
            }
            if count == 0 { break }
            filled += count
        }
        data.count = filled
        return (data, FileIdentity(status))
    }

    /// What `lstat` says of `name`, or `nil` when there is no such entry.
    package func status(of name: String) -> FileStatus? {
        guard let dir = try? openDirectory() else { return nil }
        defer { close(dir) }
        var status = stat()
        guard fstatat(dir, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return FileStatus(
            identity: FileIdentity(status),
            kind: EntryKind(mode: status.st_mode),
            size: Int64(status.st_size),
            modificationTime: Date(
                timeIntervalSince1970: TimeInterval(status.st_mtim.tv_sec) + TimeInterval(status.st_mtim.tv_nsec)
                    / 1e9)
        )
    }

    /// The names of the directory's entries, sorted, without `.` and `..`.
    package func entries() throws(WLStorageError) -> [String] {
        try entries { _ in true }.sorted()
    }

    /// The names of the entries whose name bytes pass `included`, in directory order, without `.` and `..`.
    /// Only those names are made into strings, so a scan of a large directory for a few names stays cheap.
    private func entries(where included: (UnsafeBufferPointer<UInt8>) -> Bool) throws(WLStorageError) -> [String] {
        let dir = try openDirectory()
        guard let stream = fdopendir(dir) else {
            let code = errno
            close(dir)
            throw error(.readFailed, "cannot list the storage directory", errno: code)
        }
        defer { closedir(stream) }  // closes `dir` too
        var names: [String] = []
        while let entry = readdir(stream) {
            withUnsafeBytes(of: &entry.pointee.d_name) { raw in
                let bytes = raw.bindMemory(to: UInt8.self)
                let name = UnsafeBufferPointer(rebasing: bytes[..<(bytes.firstIndex(of: 0) ?? bytes.count)])
                let isDot = name.count == 1 && name[0] == UInt8(ascii: ".")
                let isDotDot = name.count == 2 && name[0] == UInt8(ascii: ".") && name[1] == UInt8(ascii: ".")
                if !isDot && !isDotDot && included(name) { names.append(String(decoding: name, as: UTF8.self)) }
            }
        }
        return names
    }

    // MARK: Write

    /// Replaces `name` with `contents`, atomically and durably, and returns the new file's identity.
    ///
    /// The sequence is: `openat` a temporary file (`O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`, mode 0600), `flock`
    /// it, `fchmod` 0600, `write` in full, `fsync`, check that nothing but a regular file stands at `name`,
    /// `renameat`, `fsync` the directory. On any failure the temporary file is removed and the old file is
    /// left as it was.
    @discardableResult
    package func write(_ name: String, contents: Data) throws(WLStorageError) -> FileIdentity {
        let dir = try openDirectory()
        defer { close(dir) }

        // Create and lock the temporary file under the directory's shared lock (see the type's discussion).
        _ = retryingEINTR { flock(dir, LOCK_SH) }
        let temporary = Self.temporaryName(for: name)
        let fd = retryingEINTR {
            openat(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        }
        let openErrno = errno
        if fd >= 0 { _ = retryingEINTR { flock(fd, LOCK_EX) } }
        _ = flock(dir, LOCK_UN)
        guard fd >= 0 else {
            throw error(.writeFailed, "cannot create a temporary file", name: temporary, errno: openErrno)
        }

        var renamed = false
        var isOpen = true
        defer {
            if !renamed { unlinkat(dir, temporary, 0) }
            if isOpen { close(fd) }
        }

        guard fchmod(fd, 0o600) == 0 else {
            throw error(.writeFailed, "cannot set the file mode", name: temporary, errno: errno)
        }
        let writeErrno = contents.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> Int32? in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return nil
        }
        if let writeErrno {
            throw error(.writeFailed, "cannot write the file", name: temporary, errno: writeErrno)
        }
        guard retryingEINTR({ fsync(fd) }) == 0 else {
            throw error(.writeFailed, "cannot sync the file", name: temporary, errno: errno)
        }
        var status = stat()
        if fstatat(dir, name, &status, AT_SYMLINK_NOFOLLOW) == 0, (status.st_mode & S_IFMT) != S_IFREG {
            throw notRegular(name, EntryKind(mode: status.st_mode))
        }
        guard renameat(dir, temporary, dir, name) == 0 else {
            throw error(.writeFailed, "cannot rename the temporary file into place", name: name, errno: errno)
        }
        renamed = true
        guard fstat(fd, &status) == 0 else {
            throw error(.writeFailed, "cannot inspect the written file", name: name, errno: errno)
        }
        isOpen = false
        // On Linux the descriptor is released even when close reports EINTR; the data is already synced.
        if close(fd) != 0, errno != EINTR {
            throw error(.writeFailed, "cannot close the file", name: name, errno: errno)
        }
        guard retryingEINTR({ fsync(dir) }) == 0 else {
            throw error(.writeFailed, "cannot sync the storage directory", errno: errno)
        }
        return FileIdentity(status)
    }

    /// Moves `name` aside to a name that says it did not decode, and returns the new name.
    ///
    /// When `identity` is given, the file is moved only if it is still that version: a file another program has
    /// replaced meanwhile is left in place.
    package func moveAside(_ name: String, ifStill identity: FileIdentity? = nil) throws(WLStorageError) -> String {
        let dir = try openDirectory()
        defer { close(dir) }
        if let identity {
            var status = stat()
            guard fstatat(dir, name, &status, AT_SYMLINK_NOFOLLOW) == 0, FileIdentity(status) == identity else {
                throw error(
                    .readFailed, "the file changed while it was read; it is left in place", name: name, errno: nil)
            }
        }
        let aside = Self.movedAsideName(for: name)
        guard renameat(dir, name, dir, aside) == 0 else {
            throw error(.writeFailed, "cannot move the undecodable file aside", name: name, errno: errno)
        }
        _ = retryingEINTR { fsync(dir) }
        return aside
    }

    /// Removes the regular file `name`. Returns `false` when there was none.
    @discardableResult
    package func remove(_ name: String) throws(WLStorageError) -> Bool {
        let dir = try openDirectory()
        defer { close(dir) }
        var status = stat()
        guard fstatat(dir, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return false }
            throw error(.writeFailed, "cannot inspect the file", name: name, errno: errno)
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw notRegular(name, EntryKind(mode: status.st_mode)) }
        guard unlinkat(dir, name, 0) == 0 else {
            if errno == ENOENT { return false }
            throw error(.writeFailed, "cannot remove the file", name: name, errno: errno)
        }
        _ = retryingEINTR { fsync(dir) }
        return true
    }

    /// Removes the temporary files of writers that are no longer at work, and returns their names.
    @discardableResult
    package func removeAbandonedTemporaryFiles() throws(WLStorageError) -> [String] {
        let candidates = try entries { $0.contains(UInt8(ascii: "~")) }.filter(Self.isTemporary)
        guard !candidates.isEmpty else { return [] }
        let dir = try openDirectory()
        defer { close(dir) }
        _ = retryingEINTR { flock(dir, LOCK_EX) }
        defer { _ = flock(dir, LOCK_UN) }
        var removed: [String] = []
        for name in candidates {
            let fd = retryingEINTR { openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
            guard fd >= 0 else { continue }
            // A writer at work holds this lock; a dead one released it when it died.
            if flock(fd, LOCK_EX | LOCK_NB) == 0, unlinkat(dir, name, 0) == 0 {
                removed.append(name)
            }
            close(fd)
        }
        if !removed.isEmpty { _ = retryingEINTR { fsync(dir) } }
        return removed
    }

    // MARK: Errors

    private func error(
        _ code: WLStorageError.Code, _ message: String, name: String? = nil, path: String? = nil, errno: Int32?
    ) -> WLStorageError {
        WLStorageError(code: code, message: message, path: path ?? name.map(filePath) ?? self.path, errno: errno)
    }

    private func notRegular(_ name: String, _ kind: EntryKind) -> WLStorageError {
        WLStorageError(
            code: .notARegularFile,
            message: "the file is a \(kind.rawValue); it is left as it is and not followed",
            path: filePath(name))
    }

    /// The absolute path of `name` in this directory.
    package func filePath(_ name: String) -> String {
        path.hasSuffix("/") ? path + name : path + "/" + name
    }
}

@inline(__always)
private func retryingEINTR<R: BinaryInteger>(_ body: () -> R) -> R {
    while true {
        let result = body()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
