import Foundation
import WLStorageCore

/// One version of a file: device, inode, size and modification time.
package struct FileIdentity: Hashable, Sendable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    package var modifiedSeconds: Int
    package var modifiedNanoseconds: Int

    init(_ status: stat) {
        self.device = UInt64(status.st_dev)
        self.inode = UInt64(status.st_ino)
        self.size = Int64(status.st_size)
        self.modifiedSeconds = Int(status.st_mtim.tv_sec)
        self.modifiedNanoseconds = Int(status.st_mtim.tv_nsec)
    }

    /// A number for this version in any process: inode, size and modification time, which a rename and a restart keep.
    package var lastingStamp: UInt64 {
        var value = StorageDirectory.mix(inode)
        value = StorageDirectory.mix(value ^ UInt64(bitPattern: size))
        value = StorageDirectory.mix(value ^ UInt64(bitPattern: Int64(modifiedSeconds)))
        return StorageDirectory.mix(value ^ UInt64(bitPattern: Int64(modifiedNanoseconds)))
    }
}

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
    package var size: Int64 { identity.size }
    package var modificationTime: Date {
        Date(timeIntervalSince1970: Double(identity.modifiedSeconds) + Double(identity.modifiedNanoseconds) / 1e9)
    }

    init(_ status: stat) {
        identity = FileIdentity(status)
        kind = EntryKind(mode: status.st_mode)
    }
}

/// What a directory is, whatever path reaches it (symlink, bind mount, `a/../b`): its device and inode.
package struct DirectoryIdentity: Hashable, Sendable, CustomStringConvertible {
    package var device: UInt64
    package var inode: UInt64

    package var description: String { "\(device):\(inode)" }
}

/// A storage directory and every file operation the package does in it: the directory opened afresh for each (a symlink
/// in its path followed), files reached relative to it, and a symlink where a file should be never followed.
///
/// Temporary files are `NAME~<16 hex>.tmp` (``writtenFileName(ofTemporary:)``). A writer holds an exclusive `flock` on
/// its temporary file and a shared one on the directory while it creates it and from close to rename; clean-up holds
/// the directory's exclusive lock and removes only such files it can lock, so never a working writer's. A conditional
/// replacement holds the directory's lock exclusively through its exchanges.
package struct StorageDirectory: Sendable, Hashable {
    /// The path and the hash of its bytes, made once and shared by copies.
    private final class Path: Sendable {
        let path: String
        let hash: Int

        init(_ path: String) {
            var path = path
            var hasher = Hasher()
            path.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            (self.path, self.hash) = (path, hasher.finalize())
        }
    }

    private let storage: Path

    package var path: String { storage.path }

    package init(path: String) { self.storage = Path(path) }

    /// Equal when their paths are the same bytes, as the file system compares names (`é` composed or not differ).
    package static func == (lhs: Self, rhs: Self) -> Bool {
        if lhs.storage === rhs.storage { return true }
        guard lhs.storage.hash == rhs.storage.hash else { return false }
        var left = lhs.path
        var right = rhs.path
        guard left.utf8.count == right.utf8.count else { return false }
        return left.withUTF8 { left in
            right.withUTF8 { right in
                left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0
            }
        }
    }

    package func hash(into hasher: inout Hasher) { hasher.combine(storage.hash) }

    // MARK: System calls

    /// Runs `body`, a system call on `name` (`nil`: the directory), unless a test injects a fault; again on `EINTR`.
    @inline(__always)
    func retrying<R: BinaryInteger>(_ systemCall: SystemCall, _ name: String?, _ body: () -> R) -> R {
        while true {
            let fault = FaultInjection.fault(systemCall, directory: path, name: name)
            if let fault { errno = fault }
            let result = fault == nil ? body() : -1
            if result < 0 && errno == EINTR { continue }
            return result
        }
    }

    /// Closes `fd`. On Linux it is released even when `close` fails, so it is never closed twice (which could close
    /// another thread's new descriptor); `EINTR` counts as closed.
    func closeDescriptor(_ fd: CInt, _ name: String?) -> CInt {
        if let code = FaultInjection.fault(.close, directory: path, name: name) {
            _ = Glibc.close(fd)
            errno = code
            return code == EINTR ? 0 : -1
        }
        let result = Glibc.close(fd)
        if result != 0 && errno == EINTR { return 0 }
        return result
    }

    // MARK: Directory

    /// Creates the directory and missing parents (0700), syncing every parent so its entry is durable; its identity.
    @discardableResult
    package func create() throws(WLStorageError) -> DirectoryIdentity {
        var prefix = ""
        var parents: [String] = []
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            parents.append(prefix.isEmpty ? "/" : prefix)
            prefix += "/" + component
            if retrying(.mkdir, nil, { mkdir(prefix, 0o700) }) == 0 {
                // The umask may have taken bits away; the directory must be 0700.
                _ = retrying(.chmod, nil) { chmod(prefix, 0o700) }
                continue
            }
            let code = errno
            guard code == EEXIST else {
                throw error(.directoryUnavailable, "cannot create the storage directory", path: prefix, errno: code)
            }
        }
        let identity = try self.identity()
        // A parent counts as synced once a sync of it succeeded: one under way on another thread may still fail.
        for parent in parents where !SyncedParents.contains(parent) {
            let fd = retrying(.open, "..") { open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            guard fd >= 0 else { continue }
            if retrying(.fsync, "..", { fsync(fd) }) == 0 { SyncedParents.insert(parent) }
            _ = closeDescriptor(fd, "..")
        }
        return identity
    }

    /// The directory's identity now, following symlinks in its path.
    package func identity() throws(WLStorageError) -> DirectoryIdentity {
        var status = stat()
        guard retrying(.stat, nil, { stat(path, &status) }) == 0 else {
            throw error(.directoryUnavailable, "cannot open the storage directory", errno: errno)
        }
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw error(.directoryUnavailable, "the storage directory path is not a directory", errno: ENOTDIR)
        }
        return DirectoryIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    func openDirectory() throws(WLStorageError) -> CInt {
        let fd = retrying(.open, nil) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw error(.directoryUnavailable, "cannot open the storage directory", errno: errno) }
        return fd
    }

    // MARK: Read

    /// The contents of `name` (at most `limit` bytes) and their identity, or `nil` when there is no such file. Throws
    /// ``WLStorageError/Code/notARegularFile`` (not opened), ``WLStorageError/Code/valueTooLarge`` or `readFailed`.
    package func readVersion(
        _ name: String, limit: Int
    ) throws(WLStorageError) -> (contents: Data, identity: FileIdentity)? {
        // O_NOFOLLOW refuses a symlink as the last component; O_NONBLOCK keeps a FIFO from blocking the open.
        let fd = withFilePath(name) { filePath in
            retrying(.open, name) { open(filePath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        }
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            if let status = status(of: name), !status.isRegularFile { throw notRegular(name, status.kind) }
            throw error(.readFailed, "cannot open the file", name: name, errno: code)
        }
        defer { _ = closeDescriptor(fd, name) }
        var status = stat()
        guard retrying(.stat, name, { fstat(fd, &status) }) == 0 else {
            throw error(.readFailed, "cannot inspect the file", name: name, errno: errno)
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw notRegular(name, EntryKind(mode: status.st_mode)) }
        let size = max(0, Int(status.st_size))
        guard size <= limit else { throw tooLarge(name, size: size, limit: limit) }
        // Only `fstat`'s size is read (writers replace files whole); a file that says it is empty is read to its end.
        var data = Data(count: max(size, 1))
        var filled = 0
        while size == 0 || filled < size {
            if filled == data.count {
                guard data.count < limit else { throw tooLarge(name, size: data.count + 1, limit: limit) }
                data.count = min(limit, data.count + max(4_096, data.count))
            }
            let count = data.withUnsafeMutableBytes { buffer in
                retrying(.read, name) { Glibc.read(fd, buffer.baseAddress! + filled, buffer.count - filled) }
            }
            if count < 0 {
                throw error(.readFailed, "cannot read the file", name: name, errno: errno)
            }
            if count == 0 { break }
            filled += count
        }
        if data.count != filled { data.count = filled }
        return (data, FileIdentity(status))
    }

    /// What `lstat` says of `name`, or `nil` when there is no such entry (or it cannot be inspected).
    package func status(of name: String) -> FileStatus? {
        var status = stat()
        guard retrying(.stat, name, { lstat(filePath(name), &status) }) == 0 else { return nil }
        return FileStatus(status)
    }

    /// The names of the directory's entries, sorted, without `.` and `..`.
    package func entries() throws(WLStorageError) -> [String] { try entries { _ in true }.sorted() }

    /// The names whose bytes pass `included` (only those made into strings), in directory order, without `.` and `..`.
    func entries(where included: (UnsafeBufferPointer<UInt8>) -> Bool) throws(WLStorageError) -> [String] {
        var names: [String] = []
        try forEachEntry { name in
            if included(name) { names.append(String(decoding: name, as: UTF8.self)) }
        }
        return names
    }

    /// Calls `body` with the bytes of each entry's name, in directory order, without `.` and `..`. With
    /// `checkingErrors`, a failure to read the next entry throws rather than ends the list.
    func forEachEntry(
        checkingErrors: Bool = false, _ body: (UnsafeBufferPointer<UInt8>) -> Void
    ) throws(WLStorageError) {
        let dir = try openDirectory()
        guard let stream = fdopendir(dir) else {
            let code = errno
            _ = closeDescriptor(dir, nil)
            throw error(.readFailed, "cannot list the storage directory", errno: code)
        }
        defer { closedir(stream) }  // closes `dir` too
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                guard !checkingErrors || errno == 0 else {
                    throw error(.readFailed, "cannot list the storage directory", errno: errno)
                }
                return
            }
            withUnsafeBytes(of: &entry.pointee.d_name) { raw in
                let bytes = raw.bindMemory(to: UInt8.self)
                let name = UnsafeBufferPointer(rebasing: bytes[..<(bytes.firstIndex(of: 0) ?? bytes.count)])
                let isDotOrDotDot = (1...2).contains(name.count) && name.allSatisfy { $0 == UInt8(ascii: ".") }
                if !isDotOrDotDot { body(name) }
            }
        }
    }

    // MARK: Errors

    func error(
        _ code: WLStorageError.Code, _ message: String, name: String? = nil, path: String? = nil, errno: Int32?
    ) -> WLStorageError {
        WLStorageError(code: code, message: message, path: path ?? name.map(filePath) ?? self.path, errno: errno)
    }

    func notRegular(_ name: String, _ kind: EntryKind) -> WLStorageError {
        WLStorageError(
            code: .notARegularFile, message: "the file is a \(kind.rawValue); it is left as it is and not followed",
            path: filePath(name))
    }

    func tooLarge(_ name: String, size: Int, limit: Int) -> WLStorageError {
        WLStorageError(
            code: .valueTooLarge,
            message: "the file is \(size) bytes, more than the maximum value size of \(limit) bytes; it is not read"
                + " and is left as it is",
            path: filePath(name))
    }

    package func filePath(_ name: String) -> String { path.hasSuffix("/") ? path + name : path + "/" + name }

    /// Calls `body` with ``filePath(_:)`` of `name` as a C string made on the stack.
    func withFilePath<R>(_ name: String, _ body: (UnsafePointer<CChar>) -> R) -> R {
        let (directory, name) = (path.utf8, name.utf8)
        let separator = directory.last == UInt8(ascii: "/") ? 0 : 1
        let count = directory.count + separator + name.count + 1
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            let end = buffer.initialize(fromContentsOf: directory)
            if separator == 1 { buffer[end] = UInt8(ascii: "/") }
            _ = buffer[(end + separator)...].initialize(fromContentsOf: name)
            buffer[count - 1] = 0
            return buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: count) { body($0) }
        }
    }
}

/// The parent directories this process has synced, each once; past a few thousand the set starts again.
private enum SyncedParents {
    /// Whether `path` was synced.
    static func contains(_ path: String) -> Bool {
        FileSystemState.shared.syncedParents.withLock { $0.contains(StorageDirectory(path: path)) }
    }

    /// Records that a sync of `path` succeeded.
    static func insert(_ path: String) {
        FileSystemState.shared.syncedParents.withLock { synced in
            if synced.count >= 4_096 { synced.removeAll() }
            synced.insert(StorageDirectory(path: path))
        }
    }
}

/// C functions that the `Glibc` module does not declare, found at run time.
enum SystemFunctions {
    typealias Renameat2 =
        @convention(c) (
            CInt, UnsafePointer<CChar>?, CInt, UnsafePointer<CChar>?, CUnsignedInt
        ) -> CInt

    /// `renameat2`, in glibc since 2.28; declared only with `_GNU_SOURCE`, which Swift's `Glibc` does not set.
    static let renameat2: Renameat2? = dlsym(nil, "renameat2").map { unsafeBitCast($0, to: Renameat2.self) }

    /// `RENAME_NOREPLACE` and `RENAME_EXCHANGE` from `<linux/fs.h>`.
    static let renameNoReplace: CUnsignedInt = 1
    static let renameExchange: CUnsignedInt = 2
}
