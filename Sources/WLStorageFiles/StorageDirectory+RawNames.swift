import Foundation
import WLStorageCore

/// The entries of a storage directory by the bytes of their names, for tools that must see every entry: a `String`
/// turns non-UTF-8 bytes into U+FFFD, so such a name could not be opened. Entries are reached by `fstatat`/`openat`.
extension StorageDirectory {
    /// The names of the entries as bytes, without `.` and `..`, sorted; throws
    /// ``WLStorageError/Code/directoryUnavailable`` (`ENOENT`: none) or ``WLStorageError/Code/readFailed``.
    package func rawEntryNames() throws(WLStorageError) -> [[UInt8]] {
        var names: [[UInt8]] = []
        try forEachEntry(checkingErrors: true) { names.append(Array($0)) }
        return names.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// What `lstat` says of the entry `name`, or `nil`. The C function is `fstatat` with `AT_SYMLINK_NOFOLLOW`.
    package func status(ofEntryNamed name: [UInt8]) -> FileStatus? {
        guard let dir = try? openDirectory() else { return nil }
        defer { close(dir) }
        var status = stat()
        guard Self.withCString(name, { fstatat(dir, $0, &status, AT_SYMLINK_NOFOLLOW) }) == 0 else { return nil }
        return FileStatus(status)
    }

    /// Opens the regular file `name` (`openat` with `O_NOFOLLOW|O_NONBLOCK`, checked by `fstat`), or `nil` when there
    /// is none. Throws as ``rawEntryNames()``, or ``WLStorageError/Code/notARegularFile``.
    package func openEntryForReading(named name: [UInt8]) throws(WLStorageError) -> ReadableEntry? {
        let dir = try openDirectory()
        defer { close(dir) }
        let text = String(decoding: name, as: UTF8.self)
        let displayPath = filePath(text)
        let fd = Self.withCString(name) { name in
            retrying(.open, text) { openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) }
        }
        var status = stat()
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            let isEntry = Self.withCString(name) { fstatat(dir, $0, &status, AT_SYMLINK_NOFOLLOW) } == 0
            if isEntry, (status.st_mode & S_IFMT) != S_IFREG {
                throw notRegular(text, EntryKind(mode: status.st_mode))
            }
            throw WLStorageError(code: .readFailed, message: "cannot open the file", path: displayPath, errno: code)
        }
        guard fstat(fd, &status) == 0 else {
            let code = errno
            close(fd)
            throw WLStorageError(code: .readFailed, message: "cannot inspect the file", path: displayPath, errno: code)
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw notRegular(text, EntryKind(mode: status.st_mode))
        }
        return ReadableEntry(descriptor: fd, size: Int64(status.st_size), path: displayPath)
    }

    private static func withCString<R>(_ name: [UInt8], _ body: (UnsafePointer<CChar>) -> R) -> R {
        (name + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }
}

/// A regular file of a storage directory, open for reading; closed when the value goes away.
package struct ReadableEntry: ~Copyable {
    package let descriptor: CInt
    /// The size `fstat` gave when the file was opened.
    package let size: Int64
    /// The file's path, for messages. A name that is not UTF-8 has U+FFFD in place of its invalid bytes here.
    package let path: String

    /// Reads into `buffer` (`read`): how many bytes, 0 at the end; throws ``WLStorageError/Code/readFailed``.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(WLStorageError) -> Int {
        while true {
            let count = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            let code = errno
            if code == EINTR { continue }
            throw WLStorageError(code: .readFailed, message: "cannot read the file", path: path, errno: code)
        }
    }

    deinit { close(descriptor) }
}
