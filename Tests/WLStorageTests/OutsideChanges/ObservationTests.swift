import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

private struct Settings {
    @WLStorage var name: String

    init(directory: URL) {
        _name = fileStorage("name", in: directory, default: "anonymous", flushInterval: nil)
    }
}

/// Counts the values a subscription delivered, and remembers the last.
private final class Received<T: Sendable>: Sendable {
    private let values = Lock<[T]>([])
    func append(_ value: T) { values.withLock { $0.append(value) } }
    var all: [T] { values.withLock { $0 } }
}

@Suite(.capturingOutput, .timeLimit(.minutes(5))) struct ObservationTests {
    @Test func observationTrackingFiresOnAChangeFromAnotherThread() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let fired = Atomic<Bool>(false)
        let seen = withObservationTracking {
            storage.wrappedValue
        } onChange: {
            fired.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(seen == 0)
        Thread.detachNewThread { storage.wrappedValue = 1 }
        let didFire = eventually { fired.load(ordering: .sequentiallyConsistent) }
        #expect(didFire)
    }

    @Test func theProjectedValueIsTheStorage() throws {
        try withTemporaryDirectory { directory in
            let settings = Settings(directory: directory)
            settings.name = "Ada"
            settings.$name.flush()
            #expect(stored(String.self, key: "name", in: directory) == "Ada")
            #expect(settings.$name.key == "name")
        }
    }

    @Test func valuesYieldsTheCurrentValueThenEveryChange() async throws {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 5))
        var iterator = storage.values.makeAsyncIterator()
        #expect(await iterator.next() == 5)
        storage.wrappedValue = 6
        #expect(await iterator.next() == 6)
        storage.wrappedValue = 7
        #expect(await iterator.next() == 7)
    }

    @Test func aSlowConsumerGetsTheLatestValueNotABacklog() async throws {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        var iterator = storage.values.makeAsyncIterator()
        #expect(await iterator.next() == 0)
        for value in 1...1_000 { storage.wrappedValue = value }
        #expect(await iterator.next() == 1_000)
        storage.wrappedValue = 1_001
        #expect(await iterator.next() == 1_001)
    }

    @Test func cancellingTheConsumerLeavesNothingBehind() async throws {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let started = Occurrence()
        let consumer = Task {
            var count = 0
            for await _ in storage.values {
                started.happen()
                count += 1
            }
            return count
        }
        // A task of the pool, which a busy machine may start late: waited for, not polled.
        await started.wait()
        #expect(storage.cell.listenerCount == 1)
        consumer.cancel()
        #expect(await consumer.value >= 1)
        let cleanedUp = await waitUntil { storage.cell.listenerCount == 0 }
        #expect(cleanedUp)
    }

    @Test func onChangeDeliversEveryChangeInOrderOnTheChosenQueue() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        let queue = DispatchQueue(label: "test.delivery")
        let marker = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: marker, value: true)
        let received = Received<Int>()
        let onQueue = Atomic<Bool>(true)
        let subscription = storage.onChange(queue: queue) { value in
            if DispatchQueue.getSpecific(key: marker) != true {
                onQueue.store(false, ordering: .sequentiallyConsistent)
            }
            received.append(value)
        }
        for value in 1...100 { storage.wrappedValue = value }
        let all = eventually { received.all.count == 100 }
        #expect(all)
        #expect(received.all == Array(1...100))
        let alwaysOnQueue = onQueue.load(ordering: .sequentiallyConsistent)
        #expect(alwaysOnQueue)

        subscription.cancel()
        storage.wrappedValue = 101
        queue.sync {}
        #expect(received.all.last == 100)
        #expect(storage.cell.listenerCount == 0)
    }

    @Test func aDroppedSubscriptionStopsItsHandler() {
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: RecordingBacker<Int>(stored: 0))
        do {
            let subscription = storage.onChange(queue: .global()) { _ in }
            #expect(storage.cell.listenerCount == 1)
            _ = subscription
        }
        #expect(storage.cell.listenerCount == 0)
    }
}

@Suite(.capturingOutput) struct SharedFileTests {
    @Test func twoStoragesOfTheSameFileShareOneValueAndOneThrottle() throws {
        try withTemporaryDirectory { directory in
            let first = fileStorage("shared", in: directory, default: 0, flushInterval: nil)
            let second = fileStorage("shared", in: directory, default: 0, flushInterval: nil)
            #expect(first.cell === second.cell)
            first.wrappedValue = 41
            #expect(second.wrappedValue == 41)
            second.wrappedValue = 42
            first.flush()
            #expect(stored(Int.self, key: "shared", in: directory) == 42)
            #expect(!second.hasPendingChanges)
        }
    }

    @Test func aChangeThroughOneNotifiesObserversOfTheOther() throws {
        try withTemporaryDirectory { directory in
            let first = fileStorage("shared", in: directory, default: "", flushInterval: nil)
            let second = fileStorage("shared", in: directory, default: "", flushInterval: nil)
            let fired = Atomic<Bool>(false)
            _ = withObservationTracking {
                second.wrappedValue
            } onChange: {
                fired.store(true, ordering: .sequentiallyConsistent)
            }
            first.wrappedValue = "changed"
            let didFire = fired.load(ordering: .sequentiallyConsistent)
            #expect(didFire)
        }
    }

    @Test func anotherValueTypeForTheSameFileIsAClearErrorAndTheFileIsUntouched() throws {
        try withTemporaryDirectory { directory in
            let numbers = fileStorage("mixed", in: directory, default: 5, flushInterval: nil)
            numbers.flush()
            let text = fileStorage("mixed", in: directory, default: "text", flushInterval: nil)
            #expect(text.lastError?.code == .typeMismatch)
            // The message names both Swift types as a user writes them, not the package's internal ones.
            let message = text.lastError?.message ?? ""
            #expect(message.contains("a storage of Int has the file in use"), "\(message)")
            #expect(message.contains("this storage's type is String"), "\(message)")
            #expect(text.lastError?.message.contains("StorageCell") == false)
            #expect(text.wrappedValue == "text")
            text.wrappedValue = "other"
            text.flush()
            #expect(stored(Int.self, key: "mixed", in: directory) == 5)
            #expect(numbers.wrappedValue == 5)
            #expect(numbers.lastError == nil)
        }
    }

    @Test func whenTheLastStorageOfAFileIsGoneANewOneReadsTheFileAgain() throws {
        try withTemporaryDirectory { directory in
            do {
                let storage = fileStorage("again", in: directory, default: 0, flushInterval: nil)
                storage.wrappedValue = 3
            }
            try Data("9".utf8).write(to: directory.appendingPathComponent("again"))
            #expect(fileStorage("again", in: directory, default: 0, flushInterval: nil).wrappedValue == 9)
        }
    }
}

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
            let checksBefore = storage.cell.externalChecks
            try storeFromAnotherProcess("outside", key: "race", in: directory)
            let looked = eventually { storage.cell.externalChecks > checksBefore }
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
