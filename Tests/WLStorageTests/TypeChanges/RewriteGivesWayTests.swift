import Foundation
import Synchronization
import Testing

@testable import WLStorage

// The rewrite in the current shape of a value read in an earlier one is not a change of the program: a change that
// another program made since the read wins over it, in a directory as in a store that writes on condition, even when
// the news of that change has not reached the program yet.

private struct PanelV1: Codable, Equatable, Sendable {
    var stamp = 0
    var wide = false
}

private struct PanelV2: Codable, Equatable, Sendable {
    var stamp = 0
    var width = 800
}

private let fromV1: [WLStorageMigration<PanelV2>] = [
    .from(PanelV1.self) { PanelV2(stamp: $0.stamp, width: $0.wide ? 1_600 : 800) }
]

/// Set until taken once.
private final class Once: Sendable {
    private let state = Atomic<Bool>(true)

    /// Whether it was still set; it is not any more.
    func take() -> Bool { state.exchange(false, ordering: .sequentiallyConsistent) }

    var isSet: Bool { state.load(ordering: .sequentiallyConsistent) }
}

@Suite(.capturingOutput)
struct RewriteGivesWayTests {
    /// A program of the newer version reads the older shape and keeps its rewrite pending (no flush interval); another
    /// program stores and flushes a set of its own. Whether the newer program has heard of that set or not, its flush
    /// must not write the migration of the value it read over it. Here it cannot hear: every read of the directory
    /// that is not the test's own (the checks of the change feed, on their own threads) fails.
    @Test func aPendingRewriteOfWhatWasReadDoesNotReplaceAChangeItHasNotHeardOf() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("panel")
            try Data(#"{"stamp":1,"wide":true}"#.utf8).write(to: file)
            let testThread = pthread_self()
            FaultInjection.install(
                { _, _ in pthread_equal(pthread_self(), testThread) != 0 ? nil : .fail(EIO) },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let newer = WLStorage(
                key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: .directory(directory),
                migrations: fromV1)
            #expect(newer.wrappedValue == PanelV2(stamp: 1, width: 1_600))
            #expect(newer.hasPendingChanges, "the value read in the older shape is to be written back in the newer")

            // Another program of the older version sets the value and flushes.
            try replaceFromOutside(file, with: #"{"stamp":2,"wide":false}"#)

            newer.flush()
            let stored = try String(contentsOf: file, encoding: .utf8)
            #expect(
                stored == #"{"stamp":2,"wide":false}"#,
                "the rewrite of the value read before replaced another program's flushed set")
            #expect(newer.wrappedValue == PanelV2(stamp: 2, width: 800), "the newer program did not read the set")
            #expect(!newer.hasPendingChanges)
        }
    }

    /// The same, with the other program's set stored while the rewrite is being written: after the rewrite checked the
    /// file, before it renamed its temporary file over it. The rename is made only while the file is the version read.
    @Test func aChangeStoredWhileTheRewriteIsWrittenIsNotReplaced() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("panel")
            try Data(#"{"stamp":1,"wide":true}"#.utf8).write(to: file)
            let testThread = pthread_self()
            let outsideWrite = Once()
            FaultInjection.install(
                { call, name in
                    guard pthread_equal(pthread_self(), testThread) != 0 else { return .fail(EIO) }
                    // The rewrite's temporary file is written and about to be synced: another program stores its set.
                    if call == .fsync, let name, StorageDirectory.writtenFileName(ofTemporary: name) == "panel",
                        outsideWrite.take()
                    {
                        try? replaceFromOutside(file, with: #"{"stamp":2,"wide":false}"#)
                    }
                    return nil
                },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let newer = WLStorage(
                key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: .directory(directory),
                migrations: fromV1)
            #expect(newer.wrappedValue == PanelV2(stamp: 1, width: 1_600))

            newer.flush()
            try #require(!outsideWrite.isSet, "the rewrite was not written")
            let stored = try String(contentsOf: file, encoding: .utf8)
            #expect(
                stored == #"{"stamp":2,"wide":false}"#,
                "the rewrite replaced the set another program stored while it was being written")
            #expect(newer.wrappedValue == PanelV2(stamp: 2, width: 800), "the newer program did not read the set")
            #expect(!newer.hasPendingChanges)
        }
    }

    /// The gap the rewrite documents (`WLStorageDefaultBacker.rewrite`): a directory has no conditional rename, so a
    /// set another program renames into place after the rewrite's last check of the file, before its rename, is
    /// replaced. Where the value read was an older version's saved default, the key then holds a default after that
    /// set was flushed, and the rewriting program reports nothing: what a fleet of programs of two versions sees, rarely,
    /// when a newer program opens the key just as an older one writes a set at once. Recorded as a known issue, so that
    /// this test fails once the gap is closed.
    @Test func aSetRenamedIntoPlaceBetweenTheRewritesLastCheckAndItsRenameIsReplaced() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("panel")
            try Data(#"{"stamp":0,"wide":false}"#.utf8).write(to: file)
            let testThread = pthread_self()
            let outsideWrite = Once()
            FaultInjection.install(
                { call, name in
                    guard pthread_equal(pthread_self(), testThread) != 0 else { return .fail(EIO) }
                    // The rewrite has checked the file and is about to rename: another program stores its set.
                    if call == .rename, name == "panel", outsideWrite.take() {
                        try? replaceFromOutside(file, with: #"{"stamp":9,"wide":true}"#)
                    }
                    return nil
                },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let newer = WLStorage(
                key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: .directory(directory),
                migrations: fromV1)
            #expect(newer.wrappedValue == PanelV2())

            newer.flush()
            try #require(!outsideWrite.isSet, "the rewrite was not written")
            #expect(!newer.hasPendingChanges)
            withKnownIssue("a directory has no conditional rename: the rewrite replaces the set") {
                let stored = try String(contentsOf: file, encoding: .utf8)
                #expect(stored == #"{"stamp":9,"wide":true}"#, "the rewrite of the default replaced the set")
            }
        }
    }
}
