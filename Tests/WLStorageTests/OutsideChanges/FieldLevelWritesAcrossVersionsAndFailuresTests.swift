// Field-level writes in a fleet: numbers a `Double` cannot hold, a removal of unknown fields whose write
// failed, three versions of a type changing one key of a store that writes on condition, and a key another program
// removes or empties while a change goes onto it (Guarantees.md: Several programs, one file).
import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput, .serialized) struct FieldLevelWritesAcrossVersionsAndFailuresTests {
    struct Ledger: Codable, Sendable, Equatable {
        var owner: String
        var balance: Decimal
    }

    static let key = "ledger"

    /// The members of `data`, a JSON object.
    static func object(_ data: Data?) throws -> [String: Any] {
        let data = try #require(data)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// Another program sets an amount with more digits than a `Double` holds; this storage changes another field. The
    /// amount, a field this storage never changed, must keep every digit.
    @Test func aDecimalAnotherProgramSetKeepsItsDigitsThroughAMergedWrite() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                try Data(#"{"balance":100,"owner":"ann"}"#.utf8).write(to: url)
                let storage = manualStorage(Self.key, in: directory, default: Ledger(owner: "", balance: 0))
                try #require(storage.wrappedValue.owner == "ann")
                let amount = try #require(Decimal(string: "12345678901234567.89"))
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(url, with: #"{"balance":12345678901234567.89,"owner":"ann"}"#)
                    storage.wrappedValue.owner = "bob"
                    storage.flush()
                }
                let data = try #require(contents(of: Self.key, in: directory))
                let stored = try JSONDecoder().decode(Ledger.self, from: data)
                #expect(stored == Ledger(owner: "bob", balance: amount), "\(String(decoding: data, as: UTF8.self))")
                #expect(eventually(timeout: 60) { storage.wrappedValue == Ledger(owner: "bob", balance: amount) })
            }
        }
    }

    struct Prefs: Codable, Sendable, Equatable {
        var theme: String
        var fontSize: Int
    }

    /// The removal of the members the type does not know is asked for, and its write fails once: the retry must still
    /// remove them, not write them back as the bytes read held them.
    @Test func aRemovalOfUnknownFieldsWhoseConditionalWriteFailedIsMadeByTheRetry() throws {
        let store = MemoryStore()
        store.writeFromOutside("prefs", json: #"{"extra":1,"fontSize":15,"theme":"dark"}"#)
        let storage = WLStorage(
            key: "prefs", defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        store.failConditionalWrites(1)
        storage.removeUnknownFields()
        #expect(storage.lastError != nil)
        #expect(storage.hasPendingChanges)
        storage.flush()
        #expect(storage.lastError == nil)
        let object = try Self.object(store.stored("prefs").map { Data($0.utf8) })
        #expect(object["extra"] == nil, "the unknown member was written back: \(object)")
        #expect(object["fontSize"] as? Int == 15)
    }

    /// The same through a file whose writes fail once.
    @Test func aRemovalOfUnknownFieldsWhoseFileWriteFailedIsMadeByTheRetry() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("prefs")
            try Data(#"{"extra":1,"fontSize":15,"theme":"dark"}"#.utf8).write(to: url)
            let storage = manualStorage("prefs", in: directory, default: Prefs(theme: "light", fontSize: 13))
            try #require(storage.wrappedValue.theme == "dark")
            let reads = Switch(false)
            let writes = Switch(true)
            installReadWriteFaults(in: directory, name: "prefs", reads: reads, writes: writes)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            storage.removeUnknownFields()
            #expect(storage.hasPendingChanges)
            #expect(writes.tallied > 0)
            writes.set(false)
            storage.flush()
            #expect(storage.lastError == nil)
            let object = try Self.object(contents(of: "prefs", in: directory))
            #expect(object["extra"] == nil, "the unknown member was written back: \(object)")
        }
    }

    /// A write on condition refused because another program removed the key, which it then stores anew (a reset,
    /// then its own change) before this storage's change is written: the change goes onto the new value as onto any
    /// other program's, rather than replace it whole.
    @Test func aChangeOntoAKeyRemovedAndStoredAnewAfterARefusalKeepsTheNewValuesFields() throws {
        let store = InterceptedStore()
        store.base.writeFromOutside("prefs", json: #"{"fontSize":15,"theme":"dark"}"#)
        let storage = WLStorage(
            key: "prefs", defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
        try #require(storage.wrappedValue.theme == "dark")
        storage.wrappedValue.fontSize = 16
        // Removed just before the write compares (unreported): the write is refused, and the read after it finds
        // nothing; the other program stores its new value while that read returns.
        store.beforeNextConditionalWrite { try? store.base.remove(key: "prefs") }
        let release = DispatchSemaphore(value: 0)
        let reached = store.holdNextRead(afterReadingUntil: release)
        let flushed = DispatchSemaphore(value: 0)
        startThread {
            storage.flush()
            flushed.signal()
        }
        let held = reached.wait(timeout: .now() + 120) == .success
        store.base.writeUnreported("prefs", json: #"{"fontSize":13,"theme":"blue"}"#)
        release.signal()
        try #require(held, "the read after the refused write was not held")
        try #require(flushed.wait(timeout: .now() + 120) == .success)
        let text = try #require(store.base.stored("prefs"))
        let stored = try JSONDecoder().decode(Prefs.self, from: Data(text.utf8))
        #expect(stored == Prefs(theme: "blue", fontSize: 16), "the other program's new theme was replaced")
        #expect(storage.lastError == nil)
    }

    // MARK: Three versions of a type on one key of a store that writes on condition

    struct V1: Codable, Sendable, Equatable {
        var theme = "light"
        var fontSize = 13
    }

    struct V2: Codable, Sendable, Equatable {
        var theme = "light"
        var fontSize = 13
        var lineSpacing = 1.0
    }

    struct V3: Codable, Sendable, Equatable {
        var colorScheme = "light"
        var fontSize = 13
    }

    static let v3Migrations: [WLStorageMigration<V3>] = [
        .renamed(from: "theme", to: "colorScheme"),
        .from(V2.self) { V3(colorScheme: $0.theme, fontSize: $0.fontSize) },
        .from(V1.self) { V3(colorScheme: $0.theme, fontSize: $0.fontSize) },
    ]

    /// Three programs, one of each version, each through its own handle of one store, change one field each in turn,
    /// none told of the others' writes: each write is refused, reads and goes onto the others'. Every change stays, and
    /// once the feed tells, every version reads every change, under either name.
    @Test func threeVersionsChangingDifferentFieldsOfOneKeyKeepEveryChange() throws {
        let shared = MemoryStore()
        shared.writeUnreported("settings", json: #"{"fontSize":13,"theme":"dark"}"#)
        let s1 = WLStorage(
            key: "settings", defaultValue: V1(), flushInterval: nil, store: MemoryStore(replicaOf: shared))
        let s2 = WLStorage(
            key: "settings", defaultValue: V2(), flushInterval: nil, store: MemoryStore(replicaOf: shared))
        let s3 = WLStorage(
            key: "settings", defaultValue: V3(), flushInterval: nil, store: MemoryStore(replicaOf: shared),
            migrations: Self.v3Migrations)
        try #require(s1.wrappedValue.theme == "dark")
        try #require(s2.wrappedValue.theme == "dark")
        try #require(s3.wrappedValue.colorScheme == "dark")
        func object() throws -> [String: Any] { try Self.object(shared.stored("settings").map { Data($0.utf8) }) }
        s2.wrappedValue.lineSpacing = 2
        s2.flush()
        s1.wrappedValue.fontSize = 20
        s1.flush()
        s3.wrappedValue.colorScheme = "blue"
        s3.flush()
        var stored = try object()
        #expect(stored["lineSpacing"] as? Double == 2, "\(stored)")
        #expect(stored["fontSize"] as? Int == 20, "\(stored)")
        #expect(stored["colorScheme"] as? String == "blue", "\(stored)")
        #expect(stored["theme"] as? String == "blue", "\(stored)")
        // The version before the rename changes the old name, the one with line spacing the size, again unheard of.
        s1.wrappedValue.theme = "green"
        s1.flush()
        s2.wrappedValue.fontSize = 30
        s2.flush()
        stored = try object()
        #expect(stored["lineSpacing"] as? Double == 2, "\(stored)")
        #expect(stored["fontSize"] as? Int == 30, "\(stored)")
        #expect(stored["theme"] as? String == "green", "\(stored)")
        #expect(s1.lastError == nil && s2.lastError == nil && s3.lastError == nil)
        shared.report(.key("settings"))
        #expect(eventually(timeout: 60) { s1.wrappedValue == V1(theme: "green", fontSize: 30) }, "\(s1.wrappedValue)")
        #expect(
            eventually(timeout: 60) { s2.wrappedValue == V2(theme: "green", fontSize: 30, lineSpacing: 2) },
            "\(s2.wrappedValue)")
        #expect(
            eventually(timeout: 60) { s3.wrappedValue == V3(colorScheme: "green", fontSize: 30) }, "\(s3.wrappedValue)")
        // The newest version writes once more, knowing all: a value each version reads as the others left it.
        s3.wrappedValue.fontSize = 31
        s3.flush()
        stored = try object()
        #expect(stored["lineSpacing"] as? Double == 2, "\(stored)")
        #expect(stored["theme"] as? String == "green" && stored["colorScheme"] as? String == "green", "\(stored)")
        #expect(stored["fontSize"] as? Int == 31, "\(stored)")
    }

    /// A change written onto another program's is adopted, with both, and the storage's handler is told; the handler
    /// changes another field and lets go of the storage and its subscription, the last references to both. The
    /// handler's change is written, onto the merged value, and nothing of the other program's is lost.
    @Test func aHandlerToldOfAMergedValueThatChangesItAndLetsGoOfTheStorageKeepsEveryChange() throws {
        final class Held: Sendable {
            let storage = Lock<WLStorage<Prefs>?>(nil)
            let subscription = Lock<WLStorageSubscription?>(nil)
            let seen = Lock<[Prefs]>([])
        }
        let store = MemoryStore()
        store.writeFromOutside("prefs", json: #"{"fontSize":15,"theme":"dark"}"#)
        let held = Held()
        do {
            let storage = WLStorage(
                key: "prefs", defaultValue: Prefs(theme: "light", fontSize: 13), flushInterval: nil, store: store)
            try #require(storage.wrappedValue.theme == "dark")
            held.storage.withLock { $0 = storage }
            let subscription = storage.onChange(queue: nil) { [held] value in
                held.seen.withLock { $0.append(value) }
                guard value.theme == "blue", let storage = held.storage.withLock({ $0 }) else { return }
                storage.wrappedValue.fontSize = 30
                held.storage.withLock { $0 = nil }
                held.subscription.withLock { $0 = nil }
            }
            held.subscription.withLock { $0 = subscription }
            storage.wrappedValue.fontSize = 16
            store.writeUnreported("prefs", json: #"{"fontSize":15,"theme":"blue"}"#)
            storage.flush()
        }
        #expect(
            eventually(timeout: 60) { store.stored("prefs") == #"{"fontSize":30,"theme":"blue"}"# },
            "the key holds \(store.stored("prefs") ?? "nothing")")
        #expect(held.seen.withLock { $0.contains(Prefs(theme: "blue", fontSize: 16)) }, "\(held.seen.withLock { $0 })")
        #expect(eventually(timeout: 60) { held.storage.withLock { $0 == nil } && store.feedCount == 0 })
    }
}
