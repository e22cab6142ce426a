import Foundation
import Synchronization

@testable import WLStorage

#if canImport(Glibc)
    import Glibc
#endif

/// A system call a test made itself failed.
struct SystemCallFailed: Error {
    let errno: Int32
}

/// Replaces `url` as another program would: a temporary file in the same directory renamed over it.
func replaceFromOutside(_ url: URL, with contents: String) throws {
    let temporary = url.deletingLastPathComponent()
        .appendingPathComponent(".outside-\(UInt32.random(in: 0...UInt32.max))")
    try Data(contents.utf8).write(to: temporary)
    guard rename(temporary.path, url.path) == 0 else { throw SystemCallFailed(errno: errno) }
}

/// A flag and a counter a test shares with a fault plan.
final class Switch: Sendable {
    private let on: Atomic<Bool>
    private let counter = Atomic<Int>(0)
    init(_ initial: Bool) { on = Atomic(initial) }
    var isOn: Bool { on.load(ordering: .sequentiallyConsistent) }
    func set(_ value: Bool) { on.store(value, ordering: .sequentiallyConsistent) }
    /// Counts one use of the switch.
    func tally() { counter.add(1, ordering: .sequentiallyConsistent) }
    var tallied: Int { counter.load(ordering: .sequentiallyConsistent) }
}

/// Whether `storage` has heard its key as the key is now: the version its backer last read, wrote or saw in a check
/// (``KnownVersions/last``) is the one stored, and no job of its cell runs, so the check that saw it has ended and the
/// cell's state (value, last error, what is pending) holds what it found. A test that changed the key from outside
/// waits for this, not for a count of checks: a check asked for earlier raises the count too, having read the key
/// before the change, or before it has run.
///
/// The version is stamped as the backer's medium stamps it: a file by its bytes and identity, a store's key by its
/// bytes alone (bytes the storage knows already, stored again, are heard at once); nothing stored, or empty bytes, is
/// 0, as a check that found the key removed leaves it. When the version stored is the storage's own write, the answer
/// is true too: the storage knows the key as it is. What the job does after the cell's lock (errors reported to the
/// handler, listeners told, the bytes adopted taken as the base of later changes) may still be under way.
func hasHeardWhatIsStored<Value>(_ storage: WLStorage<Value>) -> Bool {
    guard let backer = storage.cell.keyBacker else { return false }
    // `last` before the cell's state: a job that had recorded it, still running, is then seen busy.
    let last = backer.known.withLock { $0.last }
    guard let stored = try? storedStamp(backer), stored == last else { return false }
    return storage.cell.state.withLock { !$0.isBusy }
}

/// The stamp of what `backer`'s key holds now, read as a check reads it (0: nothing, or empty bytes); `nil` without a
/// directory or a file name.
private func storedStamp<Value>(_ backer: WLStorageDefaultBacker<Value>) throws -> Int? {
    if let medium = backer.storeMedium {
        guard let data = try medium.store.read(key: medium.storedKey), !data.isEmpty else { return 0 }
        return KnownVersions.stamp(data)
    }
    guard let directory = backer.directory, let name = backer.fileName else { return nil }
    guard let (data, identity) = try directory.readVersion(name, limit: .max), !data.isEmpty else { return 0 }
    return KnownVersions.stamp(data, identity: identity)
}
