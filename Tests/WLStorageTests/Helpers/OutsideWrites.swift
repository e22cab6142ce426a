import Foundation
import Synchronization

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
