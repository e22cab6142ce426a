import Dispatch
import Foundation
import Observation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// MARK: Memory

/// An `Int` behind a bare `Mutex`: the floor for a thread-safe get or set.
final class MutexBox: Sendable {
    let value = Mutex<Int>(0)
}

/// An `Int` serialized by a serial `DispatchQueue`, as the reference library keeps its value.
final class SerialQueueBox: @unchecked Sendable {  // `storage` is only touched on `queue`
    private let queue = DispatchQueue(label: "WLStorageBenchmarks.serial")
    private var storage = 0

    var value: Int {
        get { queue.sync { storage } }
        set { queue.sync { storage = newValue } }
    }
}

/// An `Int` behind a `Mutex` whose gets and sets are announced to an `ObservationRegistrar` through a key path
/// built once: the least a get or set that is both thread-safe and observable can cost.
final class ObservedBox: Observable, Sendable {
    private let registrar = ObservationRegistrar()
    private let storage = Mutex<Int>(0)
    private nonisolated(unsafe) let keyPath: KeyPath<ObservedBox, Int>

    init() {
        keyPath = \ObservedBox.value
    }

    var value: Int {
        get {
            registrar.access(self, keyPath: keyPath)
            return storage.withLock { $0 }
        }
        set {
            registrar.withMutation(of: self, keyPath: keyPath) {
                storage.withLock { $0 = newValue }
            }
        }
    }
}

// MARK: Disk

/// The durable replace sequence written out with POSIX calls and nothing else: `openat` a temporary file
/// (`O_CREAT|O_EXCL|O_CLOEXEC`, 0600), `write`, `fsync`, `close`, `renameat`, `fsync` the directory.
struct RawDurableWriter {
    /// An open descriptor of the directory the file lives in.
    let directory: CInt
    let name: String
    let temporaryName: String

    init(directory: CInt, name: String) {
        self.directory = directory
        self.name = name
        self.temporaryName = name + "~raw.tmp"
    }

    func write(_ data: Data) {
        let fd = openat(directory, temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        precondition(fd >= 0, "openat failed: errno \(errno)")
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                precondition(written > 0, "write failed: errno \(errno)")
                offset += written
            }
        }
        precondition(fsync(fd) == 0, "fsync failed: errno \(errno)")
        precondition(close(fd) == 0, "close failed: errno \(errno)")
        precondition(renameat(directory, temporaryName, directory, name) == 0, "renameat failed: errno \(errno)")
        precondition(fsync(directory) == 0, "fsync of the directory failed: errno \(errno)")
    }
}

/// Opens `url` as a directory descriptor; the caller closes it.
func openDirectory(_ url: URL) -> CInt {
    let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    precondition(fd >= 0, "cannot open \(url.path): errno \(errno)")
    return fd
}

/// Reads a whole file relative to a directory descriptor with `openat`, `fstat`, `read` and `close`.
func rawRead(directory: CInt, name: String) -> Data {
    let fd = openat(directory, name, O_RDONLY | O_CLOEXEC)
    precondition(fd >= 0, "openat \(name) failed: errno \(errno)")
    defer { close(fd) }
    var status = stat()
    precondition(fstat(fd, &status) == 0, "fstat failed: errno \(errno)")
    var data = Data(count: Int(status.st_size))
    let count = data.count
    data.withUnsafeMutableBytes { buffer in
        var offset = 0
        while offset < count {
            let read = Glibc.read(fd, buffer.baseAddress! + offset, count - offset)
            if read < 0 && errno == EINTR { continue }
            precondition(read >= 0, "read failed: errno \(errno)")
            if read == 0 { break }
            offset += read
        }
    }
    return data
}
