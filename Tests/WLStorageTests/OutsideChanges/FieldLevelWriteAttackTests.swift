// Field-level writes under a hostile fleet: numbers a `Double` cannot hold, a removal of unknown fields whose write
// failed, three versions of a type changing one key of a store that writes on condition, and a key another program
// removes or empties while a change goes onto it (Guarantees.md: Several programs, one file).
import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput, .serialized) struct FieldLevelWriteAttackTests {
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
}
