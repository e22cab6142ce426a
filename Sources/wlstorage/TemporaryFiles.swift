import Foundation
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Removes the temporary files of writers that crashed, with the library's own lock protocol, and returns the names
/// of those removed.
///
/// The library's ``StorageDirectory/removeAbandonedTemporaryFiles()`` does the work: under the directory's exclusive
/// `flock` it removes a temporary file only when it can take the file's exclusive `flock` itself, which a writer
/// at work holds until it has renamed the file. So a temporary file still present afterwards belongs to a writer at
/// work.
///
/// A writer's temporary file is a regular file named `NAME~` and 16 lowercase hex digits and `.tmp`, `NAME` being a
/// key's file name. The library's clean-up takes any name with a `~` that ends in `.tmp` (`report~draft.tmp`), so
/// while it runs, the tool holds a shared `flock` on every such entry that is not in the writer's shape: the
/// clean-up cannot lock those and leaves them. Once the library's clean-up takes the writer's shape alone, these
/// locks change nothing. (An entry of another shape created between the tool's scan and the library's is not
/// protected; the window is that of two directory listings.)
func removeAbandonedTemporaryFiles(in directory: StorageDirectory) throws(WLStorageError) -> [String] {
    var held: [CInt] = []
    defer { for descriptor in held { close(descriptor) } }
    for name in try directory.rawEntryNames() where mayBeTakenForATemporaryFile(name) {
        let isWriters = DirectoryEntry.writerTemporaryBase(of: name) != nil
        if isWriters, directory.status(ofEntryNamed: name)?.isRegularFile == true { continue }
        // The same flags as the library's clean-up: what it cannot open, it cannot remove.
        let path = Array(directory.path.utf8) + [UInt8(ascii: "/")] + name + [0]
        let descriptor = path.withUnsafeBufferPointer { path in
            path.withMemoryRebound(to: CChar.self) {
                open($0.baseAddress!, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
            }
        }
        guard descriptor >= 0 else { continue }
        // A shared lock is enough to make the clean-up's exclusive, non-blocking one fail. If another program holds
        // an exclusive lock, the clean-up fails on it just the same.
        _ = flock(descriptor, LOCK_SH | LOCK_NB)
        held.append(descriptor)
    }
    return try directory.removeAbandonedTemporaryFiles().sorted()
}

/// Whether the library's clean-up may take `name` for a temporary file: a name with a `~` that ends in `.tmp`.
private func mayBeTakenForATemporaryFile(_ name: [UInt8]) -> Bool {
    name.contains(UInt8(ascii: "~")) && name.count >= 4 && name.suffix(4).elementsEqual(".tmp".utf8)
}
