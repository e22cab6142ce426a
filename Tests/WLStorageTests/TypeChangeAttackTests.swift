import Dispatch
import Foundation
import Observation
import Testing

@testable import WLStorage

private struct A13Pane: Codable, Equatable {
    var width = 800
    var height = 600
}

private struct A13Profile: Codable, Equatable {
    var name: String
    var visits: Int
    var pane: A13Pane
}

private let a13DefaultProfile = A13Profile(name: "new", visits: 5, pane: A13Pane())

/// The earlier version's shape, migrated and written back in the current one.
private struct A13ProfileV0: Codable {
    var login: String
}

private let a13Migrations: [WLStorageMigration<A13Profile>] = [
    .from(A13ProfileV0.self) { A13Profile(name: $0.login, visits: 5, pane: A13Pane()) }
]

/// A conditional store over a memory store that runs a hook once, right after its next plain write has stored.
private final class HookedStore: WLStorageConditionalStore {
    let base = MemoryStore()
    private let hook = Lock<(@Sendable () -> Void)?>(nil)

    var identity: String { base.identity }

    func afterNextWrite(_ body: @escaping @Sendable () -> Void) { hook.withLock { $0 = body } }

    private func runHook() {
        if let body = hook.withLock({ hook -> (@Sendable () -> Void)? in
            defer { hook = nil }
            return hook
        }) {
            body()
        }
    }

    func read(key: String) throws -> Data? { try base.read(key: key) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }

    func write(key: String, data: Data) throws {
        try base.write(key: key, data: data)
        runHook()
    }

    func write(_ batch: [WLStorageStoreWrite]) throws {
        try base.write(batch)
        runHook()
    }

    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        try base.write(key: key, data: data, ifItHolds: expected)
    }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageObservation? {
        base.observeChanges(changed)
    }
}

/// Preferences of a new version, which added `theme`; the earlier one stored `shortcuts` and `homePage` only.
private struct A13Prefs: Codable, Equatable {
    var shortcuts: [String: String]
    var homePage: String?
    var theme: String
}

private let a13DefaultPrefs = A13Prefs(
    shortcuts: ["copy": "c", "paste": "v"], homePage: "https://example.com", theme: "light")

@Suite(.capturingOutput)
struct TypeChangeAttackTests {
    private func write(_ data: Data, key: String, in directory: URL) throws {
        try data.write(to: directory.appendingPathComponent(key))
    }

    private func contents(_ name: String, in directory: URL) -> String? {
        FileManager.default.contents(atPath: directory.appendingPathComponent(name).path).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    // MARK: Atomic update on a conditional store

    /// The notification of another program's change reaches the cell late, while an update's closure runs: the cell
    /// adopts that (older) value, the update's conditional write succeeds over it, and the cell never takes the
    /// update's result, which it has recorded as its own write. The storage reads a value the store no longer holds,
    /// for good.
    @Test func anUpdateOfAConditionalStoreIsSeenByItsStorageWhenALateNotificationIsAdoptedDuringTheClosure() {
        let store = MemoryStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.wrappedValue = 1
        storage.flush()
        #expect(store.stored("counter") == "1")
        // Another program stores 5; its notification has not arrived yet.
        store.contents.state.withLock { $0.values["counter"] = Data("5".utf8) }
        let runs = Lock(0)
        storage.update { value in
            let run = runs.withLock { runs -> Int in
                runs += 1
                return runs
            }
            if run == 1 {
                // The notification arrives now, and the cell adopts 5.
                store.report(.key("counter"))
                _ = eventually { storage.wrappedValue == 5 }
            }
            value += 1
        }
        #expect(store.stored("counter") == "6")
        // The store's feed would report the update's own write too (the PostgreSQL store does).
        store.report(.key("counter"))
        #expect(eventually(timeout: 5) { storage.wrappedValue == 6 })
        #expect(storage.wrappedValue == Int(store.stored("counter") ?? "") ?? -1)
    }

    // MARK: A pending rewrite in the current shape against another program's change

    /// A value read in an earlier shape is rewritten in the current one "as a change", and a pending local change
    /// wins over another program's: so another program's newer value, stored before the rewrite is written, is
    /// overwritten by the value this process merely read, and is lost (the kept bytes are the first ones, not it).
    @Test func anotherProgramsChangeBeforeTheRewriteIsNotOverwrittenByIt() async throws {
        try await withTemporaryDirectory { directory in
            try write(Data(#"{"login":"ada"}"#.utf8), key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: a13DefaultProfile, flushInterval: nil, store: .directory(directory),
                migrations: a13Migrations)
            #expect(storage.wrappedValue.name == "ada")
            #expect(storage.hasPendingChanges)  // the rewrite
            // Another program (say, the new version running beside) stores a value of its own.
            let theirs = #"{"name":"bob","pane":{"height":2,"width":1},"visits":42}"#
            try replaceFromOutside(directory.appendingPathComponent("profile"), with: theirs)
            #expect(await waitUntil(timeout: 5) { storage.wrappedValue.name == "bob" })
            storage.flush()
            #expect(stored(A13Profile.self, key: "profile", in: directory)?.name == "bob")
            #expect(stored(A13Profile.self, key: "profile", in: directory)?.visits == 42)
        }
    }

    @Test func anotherProgramsChangeInAStoreBeforeTheRewriteIsNotOverwrittenByIt() {
        let store = MemoryStore()
        store.writeFromOutside("profile", json: #"{"login":"ada"}"#)
        let storage = WLStorage(
            key: "profile", defaultValue: a13DefaultProfile, flushInterval: nil, store: store, migrations: a13Migrations
        )
        #expect(storage.wrappedValue.name == "ada")
        #expect(storage.hasPendingChanges)
        store.writeFromOutside("profile", json: #"{"name":"bob","pane":{"height":2,"width":1},"visits":42}"#)
        #expect(eventually(timeout: 5) { storage.wrappedValue.name == "bob" })
        storage.flush()
        #expect(store.stored("profile")?.contains("bob") == true)
    }

    // MARK: Filling in added fields

    /// The validator and the decoder accept a UTF-8 byte order mark, and a file in the current shape with one reads;
    /// the same file lacking a field added to the type is not filled in (the fill's parser does not skip the mark),
    /// so it is moved aside as undecodable and the user's value is replaced by the default.
    @Test func aFileWithAByteOrderMarkIsFilledInAsTheSameFileWithoutOne() throws {
        try withTemporaryDirectory { directory in
            let mark = Data([0xEF, 0xBB, 0xBF])
            let current = #"{"name":"cy","visits":1,"pane":{"width":1,"height":2}}"#
            try write(mark + Data(current.utf8), key: "current", in: directory)
            let reference = WLStorage(
                key: "current", defaultValue: a13DefaultProfile, flushInterval: nil, store: .directory(directory))
            #expect(reference.wrappedValue.name == "cy")

            try write(mark + Data(#"{"name":"ada"}"#.utf8), key: "profile", in: directory)
            let storage = WLStorage(
                key: "profile", defaultValue: a13DefaultProfile, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.name == "ada")
            #expect(storage.lastError == nil)
            #expect(!entries(of: directory).contains { $0.hasPrefix("profile~corrupt-") })
        }
    }

    // MARK: A set made before an update of a conditional store begins

    /// A set lands after the update's first flush, before its closure reads the store: the update starts from what the
    /// store held, its conditional write succeeds, and the set, pending, is written after it. The set was made before
    /// the update began (and the documentation says a pending change is written first so that the update starts
    /// from it), yet the update's change is lost.
    @Test func anUpdateOfAConditionalStoreStartsFromASetMadeBeforeItBegan() {
        let store = HookedStore()
        let storage = WLStorage(key: "counter", defaultValue: 0, flushInterval: nil, store: store)
        storage.flush()
        storage.wrappedValue = 3
        // The update's flush writes 3; as that write ends, another thread sets 7 (and returns) before the update
        // goes on.
        store.afterNextWrite {
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                storage.wrappedValue = 7
                done.signal()
            }
            done.wait()
        }
        let startedFrom = storage.update { value -> Int in
            defer { value += 1 }
            return value
        }
        storage.flush()
        #expect(startedFrom == 7)
        #expect(storage.wrappedValue == 8)
        #expect(store.base.stored("counter") == "8")
    }

    // MARK: Fields filled in from the default that the user had emptied

    /// The fill cannot tell a field that is absent because it is new from an optional that is absent because it was
    /// `nil` (JSONEncoder leaves nil optionals out): when the type gains a field, a home page the user had cleared
    /// comes back as the default's.
    @Test func anOptionalTheUserClearedIsNotFilledInFromTheDefault() throws {
        try withTemporaryDirectory { directory in
            // Stored by the earlier version with homePage nil.
            try write(Data(#"{"shortcuts":{"copy":"k"}}"#.utf8), key: "prefs", in: directory)
            let storage = WLStorage(
                key: "prefs", defaultValue: a13DefaultPrefs, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.theme == "light")
            #expect(storage.wrappedValue.homePage == nil)
        }
    }

    /// A dictionary is a JSON object too: the fill adds to it the default's entries the user had removed.
    @Test func entriesTheUserRemovedFromADictionaryAreNotFilledInFromTheDefault() throws {
        try withTemporaryDirectory { directory in
            // Stored by the earlier version after the user removed the "paste" shortcut and changed "copy".
            try write(
                Data(#"{"shortcuts":{"copy":"k"},"homePage":"https://a.example"}"#.utf8), key: "prefs",
                in: directory)
            let storage = WLStorage(
                key: "prefs", defaultValue: a13DefaultPrefs, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue.theme == "light")
            #expect(storage.wrappedValue.shortcuts == ["copy": "k"])
        }
    }

    // MARK: Observers told of an update's change

    /// An update's commit tells Observation's trackers (willSet) while its thread still counts as updating: a set
    /// from the tracker's onChange, which a set's commit allows, is refused and reported as a set "from inside its own
    /// update", though the closure has returned.
    @Test func aSetFromAnObservationHandlerDuringAnUpdatesCommitIsNotReportedAsReentrant() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("value", in: directory, default: 0, flushInterval: nil)
            // The handler sets the storage once (Observation tells a tracker again of a change made from its own
            // handler).
            func track() {
                let once = Lock(false)
                withObservationTracking {
                    _ = storage.wrappedValue
                } onChange: {
                    let first = once.withLock { fired -> Bool in
                        defer { fired = true }
                        return !fired
                    }
                    guard first else { return }
                    storage.wrappedValue = 100
                }
            }
            // Around a set: no error.
            track()
            storage.wrappedValue = 1
            #expect(storage.lastError == nil)
            // Around an update's commit, after its closure returned.
            track()
            storage.update { $0 += 1 }
            #expect(storage.lastError == nil)
        }
    }

    // MARK: Migrations of a storage that joins a cell

    /// A second storage of a file already open joins its cell, and its migrations are dropped without a word: an
    /// outside change in the earlier shape, which the storage was given the migration for, is reported undecodable
    /// and not adopted.
    @Test func theMigrationsOfAStorageThatJoinsAnOpenCellAreUsed() async throws {
        try await withTemporaryDirectory { directory in
            let first = WLStorage(key: "mode", defaultValue: A13Mode(theme: "light"), store: .directory(directory))
            first.flush()
            let second = WLStorage(
                key: "mode", defaultValue: A13Mode(theme: "light"), store: .directory(directory),
                migrations: [.from(A13ModeV1.self) { A13Mode(theme: $0.dark ? "dark" : "light") }])
            try replaceFromOutside(directory.appendingPathComponent("mode"), with: #"{"dark":true}"#)
            #expect(await waitUntil(timeout: 5) { second.wrappedValue.theme == "dark" })
            #expect(second.lastError == nil)
        }
    }
}

private struct A13ModeV1: Codable {
    var dark: Bool
}

private struct A13Mode: Codable, Equatable {
    var theme: String
}
