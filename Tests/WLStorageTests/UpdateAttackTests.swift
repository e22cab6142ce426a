import Dispatch
import Foundation
import Testing

@testable import WLStorage

/// A shape that is either of two cases, as Swift synthesizes `Codable` for an enum with associated values: an object
/// with one key, the case's name.
private enum B13Shape: Codable, Equatable {
    case circle(radius: Int)
    case square(side: Int)
}

/// The earlier version stored `name` and `shape`; this one added `visits`.
private struct B13Drawing: Codable, Equatable {
    var name: String
    var shape: B13Shape
    var visits: Int
}

private struct B13Pane: Codable, Equatable {
    var width = 800
    var height = 600
}

/// The earlier version stored `title` only; this one renamed it `name` and added `pane`.
private struct B13Window: Codable, Equatable {
    var name: String
    var pane: B13Pane
}

private struct B13WindowV1: Codable {
    var title: String
}

/// A value of the earlier version is migrated, and written back in the current shape.
private let b13Migrations: [WLStorageMigration<B13Window>] = [
    .from(B13WindowV1.self) { B13Window(name: $0.title, pane: B13Pane()) }
]

@Suite(.capturingOutput)
struct UpdateAttackTests {
    private func write(_ text: String, key: String, in directory: URL) throws {
        try Data(text.utf8).write(to: directory.appendingPathComponent(key))
    }

    private func contents(_ name: String, in directory: URL) -> String? {
        FileManager.default.contents(atPath: directory.appendingPathComponent(name).path).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    // MARK: Filling in fields

    /// An enum with associated values is encoded as an object whose one key names the case. When the stored case is
    /// not the default's, "merging objects at every depth" adds the default's case key next to the stored one, and the
    /// merged object decodes as no enum; the fill is abandoned as a whole, although the type decodes the bytes with
    /// only the new field added (the documented minimal fill). The user's drawing is moved aside and replaced by the
    /// default.
    @Test func aStoredEnumCaseOtherThanTheDefaultsDoesNotKeepAnAddedFieldFromBeingFilledIn() throws {
        try withTemporaryDirectory { directory in
            // Stored by the earlier version, which had no `visits`.
            try write(#"{"name":"logo","shape":{"square":{"side":4}}}"#, key: "drawing", in: directory)
            let defaultDrawing = B13Drawing(name: "new", shape: .circle(radius: 1), visits: 0)
            let storage = WLStorage(
                key: "drawing", defaultValue: defaultDrawing, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue == B13Drawing(name: "logo", shape: .square(side: 4), visits: 0))
            #expect(!entries(of: directory).contains { $0.hasPrefix("drawing~corrupt-") })
        }
    }

    // MARK: The bytes kept from before the type changed

    /// Something other than a file stands at `NAME~before-type-change` (a directory): the copy of the bytes cannot be
    /// made there, but the "create without replacing" that makes it only reports that the name is taken, which the
    /// backer reads as "kept by an earlier run". The file is rewritten in the new shape and its bytes from before the
    /// type change are kept nowhere, though the documentation says that a value whose copy cannot be made is not
    /// written back.
    @Test func aDirectoryAtTheKeptCopysNameDoesNotLetTheRewriteLoseTheOldBytes() throws {
        try withTemporaryDirectory { directory in
            let old = #"{"title":"main"}"#
            try write(old, key: "window", in: directory)
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("window~before-type-change"), withIntermediateDirectories: false)
            let storage = WLStorage(
                key: "window", defaultValue: B13Window(name: "new", pane: B13Pane()), flushInterval: nil,
                store: .directory(directory), migrations: b13Migrations)
            #expect(storage.wrappedValue.name == "main")
            storage.flush()
            // Either the file keeps its old bytes, or they are kept somewhere in the directory.
            let keptSomewhere = entries(of: directory).contains { name in
                let url = directory.appendingPathComponent(name)
                return FileManager.default.contents(atPath: url.path) == Data(old.utf8)
            }
            #expect(keptSomewhere, "the bytes from before the type change are lost: \(entries(of: directory))")
        }
    }

    // MARK: A set from inside an update, deep in nested updates

    /// A set of a storage from inside its own update is refused and reported, so that the update does not run again
    /// without end. The thread records 15 nested updates only: inside the 16th (of 16 storages, each updated from the
    /// closure of the one before), a set of that storage from its own closure is made, the closure runs again, and
    /// again (here stopped after 50 runs).
    @Test func aSetFromInsideAnUpdateNestedSixteenDeepIsRefused() throws {
        try withTemporaryDirectory { directory in
            let storages = (0..<16).map { index in
                fileStorage("nested\(index)", in: directory, default: 0, flushInterval: nil)
            }
            let runs = Lock(0)
            func nest(_ index: Int) {
                storages[index].update { value in
                    if index + 1 < storages.count {
                        nest(index + 1)
                    } else {
                        let run = runs.withLock { runs -> Int in
                            runs += 1
                            return runs
                        }
                        if run < 50 { storages[index].wrappedValue = 100 }
                    }
                    value += 1
                }
            }
            nest(0)
            #expect(runs.withLock { $0 } == 1)
            #expect(storages[15].lastError?.code == .reentrantCall)
        }
    }

    // MARK: A pending rewrite in the current shape, and an update of a conditional store

    /// A value read in an earlier shape is to be rewritten in the current one, and that rewrite gives way to another
    /// program's change. An update of a conditional store "writes this process's pending change first": it writes the
    /// rewrite unconditionally, over what another replica stored meanwhile (its notification still on its way), and
    /// then runs its closure on the rewrite's value. The other replica's value is lost, though the store could have
    /// told (the rewrite is no change of this process, and the update's read would have found the other value).
    @Test func anUpdateOfAConditionalStoreDoesNotWriteAPendingRewriteOverAnotherReplicasValue() {
        let store = MemoryStore()
        store.writeFromOutside("window", json: #"{"title":"main"}"#)
        let storage = WLStorage(
            key: "window", defaultValue: B13Window(name: "new", pane: B13Pane()), flushInterval: nil, store: store,
            migrations: b13Migrations)
        #expect(storage.wrappedValue.name == "main")
        #expect(storage.hasPendingChanges)  // the rewrite in the current shape
        // Another replica, already of the new version, stores its value; its notification has not arrived yet.
        let theirs = #"{"name":"theirs","pane":{"height":2,"width":1}}"#
        store.contents.state.withLock { $0.values["window"] = Data(theirs.utf8) }
        storage.update { $0.pane.width += 10 }
        store.report(.key("window"))
        #expect(store.stored("window")?.contains("theirs") == true, "stored: \(store.stored("window") ?? "nil")")
        let expected = B13Window(name: "theirs", pane: B13Pane(width: 11, height: 2))
        #expect(eventually(timeout: 5) { storage.wrappedValue == expected })
    }

    // MARK: A conditional write whose outcome is unknown

    /// The conditional write stores the update's result, but its answer is lost (the PostgreSQL store's connection
    /// breaks, or its timeout passes, after the server committed): it throws, and the update is made again in the
    /// process, "as a set", by running the closure once more on the cell's value. Meanwhile the store's feed reported
    /// the write (the PostgreSQL listener takes a notification of the lost connection's server process for another
    /// program's), and the cell adopted the update's own result: the closure runs on it, and the increment counts
    /// twice.
    /// Another program stores 5, whose news comes late; an update reads 5 and stores 15. The check the news starts
    /// reads 5 while the update's closure runs, before the update writes, and its result comes after the update took
    /// 15: it must not put 5 back over the value the store holds.
    @Test func aCheckThatReadBeforeAnUpdatesWriteDoesNotAdoptWhatItReadOverTheUpdate() {
        let store = HeldReadStore()
        let replica = MemoryStore(replicaOf: store.base)
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 1
        storage.flush()
        _ = try? replica.write(key: "n", data: Data("5".utf8))
        let released = DispatchSemaphore(value: 0)
        let result = storage.update { value -> Int in
            // The news arrives now; the check it starts reads 5 and is held there until the update is done.
            let reached = store.holdNextRead(until: released)
            store.announce(.key("n"))
            #expect(reached.wait(timeout: .now() + 60) == .success)
            value += 10
            return value
        }
        #expect(result == 15)
        released.signal()
        storage.flush()  // waits for the check in flight
        #expect(storage.wrappedValue == 15)
        #expect(store.base.stored("n") == "15")
    }

    @Test func anUpdateWhoseConditionalWriteStoredButThrewIsNotAppliedTwice() {
        let store = UnknownOutcomeStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 5
        storage.flush()
        store.afterNextConditionalWrite = {
            // The write is reported as another program's, and adopted, before the answer is found lost.
            store.base.report(.key("counter"))
            _ = eventually(timeout: 5) { storage.wrappedValue == 6 }
        }
        storage.update { $0 += 1 }
        storage.flush()
        #expect(storage.wrappedValue == 6)
        #expect(store.base.stored("counter") == "6")
    }
}

/// A conditional store over a memory store whose next conditional write stores, runs a hook, then throws: its outcome
/// reads as unknown.
private final class UnknownOutcomeStore: WLStorageConditionalStore {
    let base = MemoryStore()
    private let hook = Lock<(@Sendable () -> Void)?>(nil)

    var identity: String { base.identity }

    var afterNextConditionalWrite: (@Sendable () -> Void)? {
        get { hook.withLock { $0 } }
        set { hook.withLock { $0 = newValue } }
    }

    func read(key: String) throws -> Data? { try base.read(key: key) }
    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }

    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        let stored = try base.write(key: key, data: data, ifItHolds: expected)
        let body = hook.withLock { hook -> (@Sendable () -> Void)? in
            defer { hook = nil }
            return hook
        }
        guard stored, let body else { return stored }
        body()
        throw MemoryStore.Failure()
    }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageObservation? {
        base.observeChanges(changed)
    }
}

/// A conditional store over a memory store whose feed reports only what the test announces, and whose next read, once
/// it has read, can be held until the test lets it go.
private final class HeldReadStore: WLStorageConditionalStore {
    let base = MemoryStore()
    private let hold = Lock<(reached: DispatchSemaphore, release: DispatchSemaphore)?>(nil)
    private let handler = Lock<(@Sendable (WLStorageStoreChange) -> Void)?>(nil)

    var identity: String { base.identity }

    /// Holds the next read after it has read, until `release` is signalled; the returned semaphore is signalled
    /// once the read is held.
    func holdNextRead(until release: DispatchSemaphore) -> DispatchSemaphore {
        let reached = DispatchSemaphore(value: 0)
        hold.withLock { $0 = (reached, release) }
        return reached
    }

    func announce(_ change: WLStorageStoreChange) {
        handler.withLock { $0 }?(change)
    }

    func read(key: String) throws -> Data? {
        let data = try base.read(key: key)
        if let held = hold.withLock({ hold -> (reached: DispatchSemaphore, release: DispatchSemaphore)? in
            defer { hold = nil }
            return hold
        }) {
            held.reached.signal()
            held.release.wait()
        }
        return data
    }

    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }

    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        try base.write(key: key, data: data, ifItHolds: expected)
    }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageObservation? {
        handler.withLock { $0 = changed }
        return WLStorageObservation { [weak self] in self?.handler.withLock { $0 = nil } }
    }
}
