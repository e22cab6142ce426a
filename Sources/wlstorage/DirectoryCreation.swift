import Foundation
import WLStorage
import WLStorageFiles

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Makes sure the storage directory exists for `set` and `watch`, creating its last component when it is missing,
/// and says so on standard error.
///
/// Only the last component is created, with mode 0700 whatever the umask, and its parent is synced so that the new
/// entry is durable. A missing parent is an error that names it: a mistyped `--dir` or `--program` must not grow a
/// tree of directories where no program looks. The library itself, for a program's own directory, creates every
/// missing component. The corresponding C functions are `stat`, `mkdir`, `chmod` and `fsync`.
///
/// - Throws: ``ToolFailure`` when the parent is missing, the path is not a directory, or `mkdir` fails.
func createStorageDirectoryIfMissing(_ directory: StorageDirectory) throws(ToolFailure) {
    let path = directory.path
    var status = stat()
    if stat(path, &status) == 0 {
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw ToolFailure("the storage directory path is not a directory: \(path)")
        }
        return
    }
    guard errno == ENOENT else { throw systemFailure("cannot open the storage directory", path: path, errno: errno) }

    let parent = URL(fileURLWithPath: path).deletingLastPathComponent().path
    guard mkdir(path, 0o700) == 0 else {
        let code = errno
        if code == EEXIST { return try createStorageDirectoryIfMissing(directory) }  // made meanwhile
        if code == ENOENT {
            throw ToolFailure(
                "cannot create the storage directory \(path): its parent directory \(parent) does not exist")
        }
        throw systemFailure("cannot create the storage directory", path: path, errno: code)
    }
    _ = chmod(path, 0o700)  // the umask may have taken bits away
    let parentDescriptor = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if parentDescriptor >= 0 {
        _ = fsync(parentDescriptor)
        close(parentDescriptor)
    }
    Console.error("wlstorage: created the storage directory \(path)\n")
}

/// Whether nothing stands at the storage directory's path (`stat` fails with `ENOENT`).
func isStorageDirectoryMissing(_ directory: StorageDirectory) -> Bool {
    var status = stat()
    return stat(directory.path, &status) != 0 && errno == ENOENT
}

private func systemFailure(_ message: String, path: String, errno code: Int32) -> ToolFailure {
    ToolFailure("\(message): \(path) (\(String(cString: strerror(code))))")
}
