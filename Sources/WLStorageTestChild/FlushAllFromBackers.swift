// A mode of the test child whose fault would hang a process: backers that call flushAll() from inside their writes.
import Dispatch
import Foundation
import Synchronization
import WLStorage

/// Two threads that meet before going on: each waits, at most `timeout` seconds, for the other.
final class Meeting: Sendable {
    private let arrived = Atomic<Int>(0)
    private let both = DispatchSemaphore(value: 0)

    func meet(timeout: Double = 5) {
        if arrived.add(1, ordering: .sequentiallyConsistent).newValue == 2 {
            both.signal()
            both.signal()
        }
        _ = both.wait(timeout: .now() + timeout)
    }
}

/// A backer over the default backer that calls `WLStorageSystem.flushAll()` from inside its write, as a backer that
/// syncs every storage before its own may: the documented case ("a storage whose backer is calling it is left to that
/// write"). Its first write meets the other backer's first write first, so that both are inside their writes.
final class FlushAllBacker: WLStorageBacker, Sendable {
    let key: String
    private let inner: WLStorageDefaultBacker<String>
    private let meeting: Meeting
    private let first = Atomic<Bool>(true)

    init(directory: URL, key: String, meeting: Meeting) {
        self.key = key
        self.inner = WLStorageDefaultBacker(key: key, directory: directory)
        self.meeting = meeting
    }

    func read(defaultValueClosure: () -> String) throws -> String {
        try inner.read(defaultValueClosure: defaultValueClosure)
    }

    func write(value: String) throws {
        if first.exchange(false, ordering: .sequentiallyConsistent) {
            meeting.meet()
            WLStorageSystem.flushAll()
        }
        try inner.write(value: value)
    }
}

/// `flushall-two-backers`: two storages whose backers call `flushAll()` are flushed at the same time, by two threads
/// of the program (VALUE `flush`) or by the exit flush (VALUE `exit`). Says `done` when both flushes return; a
/// process that hangs says nothing more.
func flushAllFromTwoBackers(_ how: String) {
    let directory = URL(fileURLWithPath: CommandLine.arguments[2], isDirectory: true)
    let meeting = Meeting()
    let x = WLStorage(
        defaultValueClosure: { "" }, flushInterval: nil,
        backer: FlushAllBacker(directory: directory, key: "x", meeting: meeting))
    let y = WLStorage(
        defaultValueClosure: { "" }, flushInterval: nil,
        backer: FlushAllBacker(directory: directory, key: "y", meeting: meeting))
    x.wrappedValue = "x"
    y.wrappedValue = "y"
    say("ready")
    if how == "exit" {
        // The exit flush writes both side by side: the calling thread one, a queue thread the other.
        exit(0)
    }
    let group = DispatchGroup()
    for storage in [x, y] {
        group.enter()
        Thread.detachNewThread {
            storage.flush()
            group.leave()
        }
    }
    group.wait()
    say("done")
    _exit(0)
}
