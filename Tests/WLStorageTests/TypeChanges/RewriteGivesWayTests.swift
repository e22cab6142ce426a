import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

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

    /// The same, with the other program's set renamed into place after the rewrite's last check of the file, just
    /// before the rewrite's own rename. Where the value read was an older version's saved default, a rename over it
    /// would leave the key holding a default after that set was flushed, with nothing reported: what a fleet of
    /// programs of two versions would see when a newer program opens the key just as an older one writes a set. The
    /// rewrite exchanges its file with the one in place, finds another program's version among what it displaced, and
    /// puts it back.
    @Test func aSetRenamedIntoPlaceBetweenTheRewritesLastCheckAndItsRenameIsNotReplaced() throws {
        ReportedErrors.install()
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
            let stored = try String(contentsOf: file, encoding: .utf8)
            #expect(stored == #"{"stamp":9,"wide":true}"#, "the rewrite of the default replaced the set")
            #expect(newer.wrappedValue == PanelV2(stamp: 9, width: 1_600), "the newer program did not read the set")
        }
    }

    /// What another program does to the file around the rewrite's exchange of its file with the one in place: at the
    /// exchange (`first`), and at the exchange that puts back what the first displaced (`second`).
    private struct Interleaving: Sendable {
        var first: @Sendable (URL) throws -> Void
        var second: (@Sendable (URL) throws -> Void)?
        /// The fault injected into the exchange that puts back what the first displaced.
        var secondFault: InjectedFault?
    }

    /// Opens the older shape with a pending rewrite, runs `interleaving` at the rewrite's renames of the key's file,
    /// flushes, and returns the storage and its directory for the caller's checks.
    private func rewrite(
        with interleaving: Interleaving, _ check: (WLStorage<PanelV2>, URL) throws -> Void
    ) throws {
        ReportedErrors.install()
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("panel")
            try Data(#"{"stamp":0,"wide":false}"#.utf8).write(to: file)
            let testThread = pthread_self()
            let renames = Atomic<Int>(0)
            FaultInjection.install(
                { call, name in
                    guard pthread_equal(pthread_self(), testThread) != 0 else { return .fail(EIO) }
                    guard call == .rename, name == "panel" else { return nil }
                    switch renames.add(1, ordering: .sequentiallyConsistent).newValue {
                    case 1:
                        try? interleaving.first(file)
                    case 2:
                        try? interleaving.second?(file)
                        return interleaving.secondFault
                    default:
                        break
                    }
                    return nil
                },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let newer = WLStorage(
                key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: .directory(directory),
                migrations: fromV1)
            newer.flush()
            #expect(renames.load(ordering: .sequentiallyConsistent) >= 1, "the rewrite was not written")
            try check(newer, directory)
        }
    }

    /// A set renamed into place at the exchange, and another over the rewrite's file before it is exchanged back: the
    /// newer of the two ends in place, and neither is lost to the rewrite.
    @Test func aSecondSetRenamedOverTheRewriteBeforeItGivesWayEndsInPlace() throws {
        let interleaving = Interleaving(
            first: { try replaceFromOutside($0, with: #"{"stamp":8,"wide":true}"#) },
            second: { try replaceFromOutside($0, with: #"{"stamp":9,"wide":false}"#) })
        try rewrite(with: interleaving) { newer, directory in
            let stored = try String(contentsOf: directory.appendingPathComponent("panel"), encoding: .utf8)
            #expect(stored == #"{"stamp":9,"wide":false}"#, "the newest set is not the one in place")
            #expect(newer.wrappedValue == PanelV2(stamp: 9, width: 800))
            #expect(!newer.hasPendingChanges)
            let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                $0 != "panel" && !StorageDirectory.isKeptOriginal($0)
            }
            #expect(left.isEmpty, "files left beside the key's and its original's: \(left)")
        }
    }

    /// The file removed after the rewrite's last check, before its exchange: the removal stands.
    @Test func aRemovalJustBeforeTheRewriteIsNotUndone() throws {
        let interleaving = Interleaving(first: { try FileManager.default.removeItem(at: $0) })
        try rewrite(with: interleaving) { newer, directory in
            #expect(
                !FileManager.default.fileExists(atPath: directory.appendingPathComponent("panel").path),
                "the rewrite put back a value another program removed")
            #expect(!newer.hasPendingChanges)
        }
    }

    /// A set renamed into place at the exchange, then the rewrite's file removed before the set is exchanged back: the
    /// removal came after the set, and stands.
    @Test func aRemovalOfTheRewritesFileBeforeItGivesWayStands() throws {
        let interleaving = Interleaving(
            first: { try replaceFromOutside($0, with: #"{"stamp":8,"wide":true}"#) },
            second: { try FileManager.default.removeItem(at: $0) })
        try rewrite(with: interleaving) { newer, directory in
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("panel").path))
            #expect(!newer.hasPendingChanges)
            let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                !StorageDirectory.isKeptOriginal($0)
            }
            #expect(left.isEmpty, "files left beside the original's: \(left)")
        }
    }

    /// A set renamed into place at the exchange, and the exchange that would put it back fails: the set is not lost,
    /// but kept aside under a name the tool lists, and the failure says where.
    @Test func aSetTheRewriteCannotPutBackIsKeptAside() throws {
        let interleaving = Interleaving(
            first: { try replaceFromOutside($0, with: #"{"stamp":8,"wide":true}"#) }, secondFault: .fail(EIO))
        try rewrite(with: interleaving) { newer, directory in
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            let kept = names.filter(StorageDirectory.isMovedAside)
            try #require(kept.count == 1, "no version kept aside among \(names)")
            let contents = try String(contentsOf: directory.appendingPathComponent(kept[0]), encoding: .utf8)
            #expect(contents == #"{"stamp":8,"wide":true}"#)
            // Looked for among the errors reported rather than as the last one: every call of another thread in the
            // directory fails here (a check of the outside change, on a loaded machine, can come after the flush).
            let reported = ReportedErrors.errors(under: directory).filter { $0.code == .writeFailed }
            #expect(reported.contains { $0.message.contains(kept[0]) }, "\(reported)")
        }
    }

    /// On a file system that cannot exchange two names (`EINVAL` from the exchange), the rewrite is a plain rename
    /// after its check: it is still written, and leaves nothing beside the key's file.
    @Test func whereNamesCannotBeExchangedTheRewriteIsStillWritten() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("panel")
            try Data(#"{"stamp":3,"wide":true}"#.utf8).write(to: file)
            let renames = Atomic<Int>(0)
            FaultInjection.install(
                { call, name in
                    guard call == .rename, name == "panel" else { return nil }
                    return renames.add(1, ordering: .sequentiallyConsistent).newValue == 1 ? .fail(EINVAL) : nil
                },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let newer = WLStorage(
                key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: .directory(directory),
                migrations: fromV1)
            newer.flush()
            #expect(renames.load(ordering: .sequentiallyConsistent) == 2, "the exchange, then the plain rename")
            #expect(!newer.hasPendingChanges)
            #expect(newer.lastError == nil)
            let stored = try String(contentsOf: file, encoding: .utf8)
            #expect(stored == #"{"stamp":3,"wide":true,"width":1600}"#, "the rewrite was not written")
            let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                $0 != "panel" && !StorageDirectory.isKeptOriginal($0)
            }
            #expect(left.isEmpty, "\(left)")
        }
    }

    /// A store that can neither write on condition nor tell of changes: the rewrite reads the key again just before it
    /// writes, and gives way when another program stored a value since the read (only a change made in between those
    /// two calls can still be replaced).
    @Test func aRewriteInAStoreThatCannotWriteOnConditionGivesWayToAChangeStoredSinceTheRead() {
        let store = PlainStore()
        store.put("panel", #"{"stamp":1,"wide":true}"#)
        let newer = WLStorage(
            key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: store, migrations: fromV1)
        #expect(newer.hasPendingChanges, "the value read in the older shape is to be written back in the newer")
        store.put("panel", #"{"stamp":2,"wide":false}"#)  // another program of the older version
        newer.flush()
        #expect(
            store.stored("panel") == #"{"stamp":2,"wide":false}"#,
            "the rewrite of the value read before replaced another program's set")
        #expect(newer.wrappedValue == PanelV2(stamp: 2, width: 800), "the set was not read in place of the rewrite")
        #expect(!newer.hasPendingChanges)
    }

    /// The same rewrite still pending when every storage is flushed (``WLStorageSystem/flushAll()``, the flush at exit):
    /// it reads the key again there too, rather than go whole in the store's batch over the other program's set.
    @Test func aRewriteInAStoreThatCannotWriteOnConditionGivesWayAtAFlushOfAll() {
        let store = PlainStore()
        store.put("panel", #"{"stamp":1,"wide":true}"#)
        let newer = WLStorage(
            key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: store, migrations: fromV1)
        #expect(newer.hasPendingChanges, "the value read in the older shape is to be written back in the newer")
        store.put("panel", #"{"stamp":2,"wide":false}"#)  // another program of the older version
        flushAllStores([store])
        #expect(
            store.stored("panel") == #"{"stamp":2,"wide":false}"#,
            "the flush of all wrote the rewrite of the value read before over another program's set")
        #expect(!newer.hasPendingChanges)
    }

    /// With nothing stored since the read, that store gets the rewrite.
    @Test func aRewriteInAStoreThatCannotWriteOnConditionIsWrittenWhenNothingChanged() {
        let store = PlainStore()
        store.put("panel", #"{"stamp":1,"wide":true}"#)
        let newer = WLStorage(
            key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: store, migrations: fromV1)
        newer.flush()
        #expect(store.stored("panel") == #"{"stamp":1,"wide":true,"width":1600}"#)
        #expect(!newer.hasPendingChanges)
        #expect(newer.lastError == nil)
    }
    /// Through an encrypted store, a value another program sealed with another key since the read is a change as any:
    /// the rewrite gives way to it rather than failing, and being tried again, for as long as the value stays.
    @Test func aRewriteInAStoreThatCannotWriteOnConditionGivesWayToAValueSealedWithAnotherKey() throws {
        let plain = PlainStore()
        let ours = WLStorageEncryptedStore(plain, key: try .random())
        try ours.write(key: "panel", data: Data(#"{"stamp":1,"wide":true}"#.utf8))
        let newer = WLStorage(
            key: "panel", defaultValue: PanelV2(), flushInterval: nil, store: ours, migrations: fromV1)
        #expect(newer.hasPendingChanges, "the value read in the older shape is to be written back in the newer")
        let theirs = WLStorageEncryptedStore(plain, key: try .random())
        try theirs.write(key: "panel", data: Data(#"{"stamp":2,"wide":false}"#.utf8))
        let sealed = try plain.read(key: "panel")
        newer.flush()
        #expect(try plain.read(key: "panel") == sealed, "the rewrite replaced a value sealed with another key")
        #expect(
            !newer.hasPendingChanges, "the rewrite stays pending, to be tried again for as long as that value stays")
        #expect(newer.lastError?.code == .decodingFailed, "\(String(describing: newer.lastError))")
    }
}
