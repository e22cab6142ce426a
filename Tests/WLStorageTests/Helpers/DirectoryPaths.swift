// Directories spelled exactly as given, and the values stored in them, for the tests of directory identity, symlinks
// and faults.
import Foundation
import Synchronization

@testable import WLStorage

/// The string stored in the file `name` of the directory at `path` (no standardization of the path).
func storedString(atPath path: String) -> String? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return try? JSONDecoder().decode(String.self, from: data)
}

/// A storage of `key` in the directory at `path`, spelled exactly so.
func storage(_ key: String, atPath path: String, default value: String = "", flushInterval: Int? = nil)
    -> WLStorage<String>
{
    fileStorage(key, in: URL(fileURLWithPath: path, isDirectory: true), default: value, flushInterval: flushInterval)
}

func makeDirectory(_ path: String) throws {
    guard mkdir(path, 0o700) == 0 else { throw SystemCallFailed(errno: errno) }
}

func identity(ofPath path: String) -> (UInt64, UInt64)? {
    var status = stat()
    guard stat(path, &status) == 0 else { return nil }
    return (UInt64(status.st_dev), UInt64(status.st_ino))
}

/// A flag a test shares with a fault plan.
final class TakenFlag: Sendable {
    let value: Atomic<Bool>
    init(_ initial: Bool) { value = Atomic(initial) }
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
    func set(_ newValue: Bool) { value.store(newValue, ordering: .sequentiallyConsistent) }
    /// Sets it to `false` and returns whether it was `true`.
    func take() -> Bool { value.exchange(false, ordering: .sequentiallyConsistent) }
}

/// A flag and a number that a test shares with a thread of its own.
final class Shared: Sendable {
    let flag = Atomic<Bool>(false)
    let number = Atomic<Int>(0)
}

/// Whether something, of any kind, stands at `url` (a symlink is not followed).
func exists(_ url: URL) -> Bool {
    var status = stat()
    return lstat(url.path, &status) == 0
}
