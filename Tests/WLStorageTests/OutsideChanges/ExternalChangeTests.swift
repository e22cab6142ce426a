import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct ExternalChangeTests {
    /// Runs the test child, which stores `value` under `key` in `directory` from its own process.
    private func storeFromAnotherProcess(_ value: String, key: String, in directory: URL) throws {
        let child = try ChildProcess("WLStorageTestChild", ["set", directory.path, key, value])
        let end = try #require(child.waitForExit())
        try #require(end.status == 0)
    }

    private func storeFromAnotherProcess(_ value: String, key: String, in directory: URL) async throws {
        let child = try ChildProcess("WLStorageTestChild", ["set", directory.path, key, value])
        let end = try #require(await child.exited())
        try #require(end.status == 0)
    }

    @Test func aValueWrittenByAnotherProgramIsPickedUpAndObserved() async throws {
        try await withTemporaryDirectory { directory in
            let storage = fileStorage("watched", in: directory, default: "start")
            storage.flush()
            var iterator = storage.values.makeAsyncIterator()
            #expect(await iterator.next() == "start")
            try await storeFromAnotherProcess("from outside", key: "watched", in: directory)
            #expect(await iterator.next() == "from outside")
            #expect(storage.wrappedValue == "from outside")
            #expect(!storage.hasPendingChanges)
        }
    }

    @Test func aFileWrittenInPlaceByAnotherProgramIsPickedUpToo() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("inplace", in: directory, default: 1)
            storage.flush()
            let handle = try FileHandle(forWritingTo: directory.appendingPathComponent("inplace"))
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data("22".utf8))
            try handle.close()
            let pickedUp = eventually { storage.wrappedValue == 22 }
            #expect(pickedUp)
        }
    }

    @Test func theStoragesOwnWritesDoNotComeBackAsChanges() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("own", in: directory, default: 0, flushInterval: nil)
            let received = Received<Int>()
            let queue = DispatchQueue(label: "test.own")
            let subscription = storage.onChange(queue: queue) { received.append($0) }
            defer { subscription.cancel() }
            // The marker lives in a directory of its own, so that its change is no report of the storage's directory.
            let markers = directory.appendingPathComponent("markers")
            let marker = fileStorage("marker", in: markers, default: 0, flushInterval: nil)
            marker.flush()
            let watched = ChangeSource.directory(StorageDirectory(path: directory.standardizedFileURL.path))
            let (_, reports) = Runtime.shared.router.follow(
                directory: StorageDirectory(path: directory.standardizedFileURL.path))
            defer { Runtime.shared.router.unfollow(watched) }
            let checksBefore = storage.cell.externalChecks
            storage.wrappedValue = 1
            storage.flush()
            // The rename of the write raises inotify events, which the monitor knows for this process's own and does
            // not even check. Another program's write after it is a marker: once the marker's storage has seen it,
            // the events of the write before it have been handled too (one inotify queue holds both directories').
            let temporary = markers.appendingPathComponent("marker.outside")
            try Data("7".utf8).write(to: temporary)
            #expect(rename(temporary.path, markers.appendingPathComponent("marker").path) == 0)
            #expect(eventually { marker.wrappedValue == 7 })
            // Events lost meanwhile (the queue overflowed, as it can while a busy machine runs the other tests) are a
            // report of every directory, after which every cell checks its file: a check then is no fault, but what it
            // finds is the storage's own write, which does not come back as a change (below).
            if !Runtime.shared.router.reported(watched, since: reports) {
                #expect(storage.cell.externalChecks == checksBefore)
            }
            queue.sync {}
            #expect(received.all == [1])
            #expect(storage.wrappedValue == 1)
            #expect(!storage.hasPendingChanges)
        }
    }

    @Test func aLocalChangeStillPendingWinsOverAnOutsideOneBecauseItIsWrittenLater() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("race", in: directory, default: "start", flushInterval: 3_600)
            storage.flush()
            storage.wrappedValue = "local"
            try storeFromAnotherProcess("outside", key: "race", in: directory)
            let looked = eventually { hasHeardWhatIsStored(storage) }
            #expect(looked)
            #expect(storage.wrappedValue == "local")
            storage.flush()
            #expect(stored(String.self, key: "race", in: directory) == "local")

            // With nothing pending, the next outside write is the last writer and is taken.
            try storeFromAnotherProcess("outside again", key: "race", in: directory)
            let taken = eventually { storage.wrappedValue == "outside again" }
            #expect(taken)
        }
    }

    @Test func whereInotifyIsUnavailableTheDirectoryIsPolled() throws {
        try withTemporaryDirectory { directory in
            Runtime.shared.monitor.watch(StorageDirectory(path: directory.path), inotify: false)
            #expect(Runtime.shared.monitor.isPolled(StorageDirectory(path: directory.path)))
            let storage = fileStorage("polled", in: directory, default: "start")
            storage.flush()
            try storeFromAnotherProcess("from outside", key: "polled", in: directory)
            let pickedUp = eventually { storage.wrappedValue == "from outside" }
            #expect(pickedUp)
        }
    }

    @Test func aDirectoryRemovedAndMadeAgainIsWatchedAgain() throws {
        try withTemporaryDirectory { outer in
            let directory = outer.appendingPathComponent("store", isDirectory: true)
            let storage = fileStorage("again", in: directory, default: "start", flushInterval: nil)
            storage.flush()
            try FileManager.default.removeItem(at: directory)
            storage.wrappedValue = "local"
            storage.flush()  // makes the directory again
            #expect(storage.lastError == nil)
            let rewatched = eventually { !Runtime.shared.monitor.isPolled(StorageDirectory(path: directory.path)) }
            #expect(rewatched)
            try storeFromAnotherProcess("outside", key: "again", in: directory)
            let pickedUp = eventually { storage.wrappedValue == "outside" }
            #expect(pickedUp)
        }
    }

    @Test func aDirectoryOpenedByTwoPathsKeepsNoticingChangesUnderBoth() throws {
        try withTemporaryDirectory { outer in
            let real = outer.appendingPathComponent("real", isDirectory: true)
            let alias = outer.appendingPathComponent("alias", isDirectory: true)
            try FileManager.default.createDirectory(at: real, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: alias, withDestinationURL: real)
            let first = fileStorage("first", in: real, default: "", flushInterval: nil)
            let second = fileStorage("second", in: alias, default: "", flushInterval: nil)
            first.flush()
            second.flush()
            try storeFromAnotherProcess("one", key: "first", in: real)
            try storeFromAnotherProcess("two", key: "second", in: alias)
            let both = eventually { first.wrappedValue == "one" && second.wrappedValue == "two" }
            #expect(both)
        }
    }

    @Test func anUndecodableOutsideWriteIsReportedAndLeftAlone() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("bad", in: directory, default: 3, flushInterval: nil)
            storage.flush()
            let temporary = directory.appendingPathComponent("elsewhere")
            try Data("not json".utf8).write(to: temporary)
            #expect(rename(temporary.path, directory.appendingPathComponent("bad").path) == 0)
            let reported = eventually { storage.lastError?.code == .decodingFailed }
            #expect(reported)
            #expect(storage.wrappedValue == 3)
            #expect(entries(of: directory) == ["bad"])
        }
    }
}
