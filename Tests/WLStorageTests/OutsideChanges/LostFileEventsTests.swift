// Events the kernel dropped (IN_Q_OVERFLOW: more events queued than /proc/sys/fs/inotify/max_queued_events): every
// storage of a file finds out what it missed, and goes on hearing of changes afterwards, wherever its path leads now.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

#if canImport(Glibc)
    import Glibc
#endif

/// Makes the kernel drop inotify events: holds the file monitor's queue in a subscriber's handler, queues more events
/// than the kernel keeps (16,384 by default), runs `meanwhile` (whose own events are lost), and lets the monitor go,
/// which then reads the overflow.
private func losingEvents(in scratch: URL, _ meanwhile: () throws -> Void) throws {
    let blocker = scratch.appendingPathComponent("blocker")
    try FileManager.default.createDirectory(at: blocker, withIntermediateDirectories: true)
    try whileTheFileMonitorIsHeld(scratch: scratch) {
        // Two files written in turn: consecutive events of one file would be merged into one.
        let names = [blocker.appendingPathComponent("a").path, blocker.appendingPathComponent("b").path]
        let limit =
            (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 16_384
        for index in 0..<(limit + 100) {
            let descriptor = open(names[index % 2], O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            if descriptor >= 0 { close(descriptor) }
        }
        try meanwhile()
    }
}

@Suite(.capturingOutput, .serialized) struct LostFileEventsTests {
    @Test func aChangeWhoseEventWasDroppedIsAdopted() throws {
        try withTemporaryDirectory { scratch in
            let directory = scratch.appendingPathComponent("d")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appendingPathComponent("k")
            try Data("1".utf8).write(to: file)
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(storage.wrappedValue == 1)
            try losingEvents(in: scratch) { try replaceFromOutside(file, with: "2") }
            #expect(eventually(timeout: 30) { storage.wrappedValue == 2 }, "the storage has \(storage.wrappedValue)")
        }
    }

    @Test func aDirectoryRemovedAndMadeAgainWhileEventsWereDroppedIsWatchedAgain() throws {
        try withTemporaryDirectory { scratch in
            let directory = scratch.appendingPathComponent("d")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appendingPathComponent("k")
            try Data("1".utf8).write(to: file)
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(storage.wrappedValue == 1)
            try losingEvents(in: scratch) {
                try FileManager.default.removeItem(at: directory)
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try Data("2".utf8).write(to: file)
            }
            #expect(eventually(timeout: 30) { storage.wrappedValue == 2 }, "the storage has \(storage.wrappedValue)")
            // Later changes, in the directory made again, are heard of.
            try replaceFromOutside(file, with: "3")
            #expect(eventually(timeout: 30) { storage.wrappedValue == 3 }, "the storage has \(storage.wrappedValue)")
        }
    }

    @Test func aSymlinkRetargetedWhileEventsWereDroppedIsFollowed() throws {
        try withTemporaryDirectory { scratch in
            for (release, value) in [("r0", "1"), ("r1", "2")] {
                let directory = scratch.appendingPathComponent(release)
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try Data(value.utf8).write(to: directory.appendingPathComponent("k"))
            }
            let link = scratch.appendingPathComponent("current")
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "r0")
            let storage = fileStorage("k", in: link, default: 0, flushInterval: nil)
            #expect(storage.wrappedValue == 1)
            try losingEvents(in: scratch) {
                let temporary = scratch.appendingPathComponent(".current")
                try #require(symlink("r1", temporary.path) == 0)
                try #require(rename(temporary.path, link.path) == 0)
            }
            #expect(eventually(timeout: 30) { storage.wrappedValue == 2 }, "the storage has \(storage.wrappedValue)")
            // Later changes, where the link leads now, are heard of.
            try replaceFromOutside(scratch.appendingPathComponent("r1/k"), with: "3")
            #expect(eventually(timeout: 30) { storage.wrappedValue == 3 }, "the storage has \(storage.wrappedValue)")
        }
    }

    @Test func aSubscriberOfADirectoryRemovedWhileEventsWereDroppedIsToldItIsGone() throws {
        try withTemporaryDirectory { scratch in
            let directory = scratch.appendingPathComponent("d")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let gone = Atomic<Bool>(false)
            let subscription = Runtime.shared.monitor.subscribe(toEveryFileIn: StorageDirectory(path: directory.path)) {
                if case .directoryGone = $0 { gone.store(true, ordering: .sequentiallyConsistent) }
            }
            defer { Runtime.shared.monitor.unsubscribe(subscription) }
            try losingEvents(in: scratch) { try FileManager.default.removeItem(at: directory) }
            #expect(
                eventually(timeout: 30) { gone.load(ordering: .sequentiallyConsistent) },
                "the subscriber was not told that the directory is gone")
        }
    }
}
