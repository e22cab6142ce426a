// A change written field by field onto a store's key, whose write on condition loses its answer (the store may have
// stored it): the retry makes the change again where the key still holds what it was read from, keeps another
// program's change of other fields, and never writes it over another program's change of the same field made over the
// lost write. A store that keeps no versions cannot tell a write made from one not made, and keeps such a change either
// way; a versioned store tells by the write's tag (Guarantees.md).
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput, .serialized) struct FieldLevelWriteWithLostAnswerTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Int
        var b: Int
    }

    /// A store that writes on condition, whose next such write loses its answer once made.
    enum Store: String, CaseIterable, CustomTestStringConvertible {
        /// By bytes alone (``InterceptedStore``).
        case conditional
        /// By version too, with tags (``VersionedMemoryStore``), with which a change is written field by field.
        case versioned

        var testDescription: String { rawValue }
    }

    static let key = "pair"

    /// A storage of ``key`` in a store of `kind` holding {"a":1,"b":1}, whose writes happen only when it is flushed; its
    /// next write on condition is made (unless `made` is off: it then never reaches the store), then `meanwhile` runs
    /// and the write loses its answer. Returns the storage, a function that reads what the store holds, and the store.
    static func storage(
        in kind: Store, made: Bool = true, meanwhile: @escaping @Sendable (_ writeFromOutside: (String) -> Void) -> Void
    ) throws -> (WLStorage<Pair>, () -> String?, any WLStorageStore) {
        let initial = #"{"a":1,"b":1}"#
        switch kind {
        case .conditional:
            let store = InterceptedStore(feed: .announced)
            store.base.writeUnreported(key, json: initial)
            let storage = WLStorage(key: key, defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
            try #require(storage.wrappedValue == Pair(a: 1, b: 1))
            if made {
                store.afterNextConditionalWrite(losingTheOutcome: true) {
                    meanwhile { store.base.writeUnreported(key, json: $0) }
                }
            } else {
                store.beforeNextConditionalWrite {
                    meanwhile { store.base.writeUnreported(key, json: $0) }
                    throw InterceptedStore.LostOutcome()
                }
            }
            return (storage, { store.base.stored(key) }, store)
        case .versioned:
            let store = VersionedMemoryStore()
            store.writeFromOutside(key, json: initial)
            let storage = WLStorage(key: key, defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
            try #require(storage.wrappedValue == Pair(a: 1, b: 1))
            store.loseNextAnswer(made ? .afterTheWrite : .beforeTheWrite) {
                meanwhile { try? store.write(key: key, data: Data($0.utf8)) }
            }
            return (storage, { store.stored(key) }, store)
        }
    }

    static func decoded(_ json: String?) throws -> Pair {
        try JSONDecoder().decode(Pair.self, from: Data(try #require(json).utf8))
    }

    /// Another program read this one's write, whose answer was lost, and set the same field again: its value is newer,
    /// and the retry keeps it, whether the storage's own flush makes it or a flush of every storage of the store. A
    /// versioned store's write is sent again with its tag, which the key keeps: the write was made, and is not made
    /// again (PostgreSQL and etcd tell it inside the store, by a claimed tag and by the key's history).
    @Test(arguments: Store.allCases, [false, true])
    func anotherProgramsChangeOfTheSameFieldMadeAfterAWriteWhoseAnswerWasLostIsKept(
        _ kind: Store, flushingEveryStorage: Bool
    ) throws {
        let (storage, stored, store) = try Self.storage(in: kind) { writeFromOutside in
            writeFromOutside(#"{"a":3,"b":1}"#)
        }
        storage.wrappedValue.a = 2
        storage.flush()
        if flushingEveryStorage { flushAllStores([store]) }
        storage.flush()
        #expect(try Self.decoded(stored()) == Pair(a: 3, b: 1))
        #expect(eventually(timeout: 60) { storage.wrappedValue == Pair(a: 3, b: 1) }, "holds \(storage.wrappedValue)")
        #expect(!storage.hasPendingChanges)
    }

    /// Another program changed another field over this one's write, whose answer was lost: both changes are kept.
    @Test(arguments: Store.allCases)
    func anotherProgramsChangeOfAnotherFieldMadeAfterAWriteWhoseAnswerWasLostKeepsBoth(_ kind: Store) throws {
        try Self.expectRetry(in: kind, outside: #"{"a":2,"b":5}"#, toEndAs: Pair(a: 2, b: 5))
    }

    /// The key holds the field as it was read, beside another program's change of another field: this program's change
    /// was not made (or, in a store that keeps no versions, may have been undone by a program that had not read it), and
    /// the retry makes it.
    @Test(arguments: Store.allCases)
    func aChangeAWriteWhoseAnswerWasLostDidNotLeaveIsMadeByTheRetry(_ kind: Store) throws {
        try Self.expectRetry(
            in: kind, made: kind == .conditional, outside: #"{"a":1,"b":5}"#, toEndAs: Pair(a: 2, b: 5))
    }

    /// The write whose answer was lost was made, and another program then set its field back to the value read (beside
    /// a change of another field, or alone): that value is newer. A versioned store tells by the write's tag that it
    /// was made, and the retry keeps it, as the PostgreSQL and etcd stores do; a store that writes on condition of
    /// bytes alone cannot tell this from a write never made, and makes the change again.
    @Test(arguments: Store.allCases, [#"{"a":1,"b":5}"#, #"{"a":1,"b":1}"#])
    func aFieldSetBackOverAWriteFoundMadeKeepsTheValueSetBackOnAVersionedStore(_ kind: Store, outside: String) throws {
        let setBack = try Self.decoded(outside)
        let expected = kind == .versioned ? setBack : Pair(a: 2, b: setBack.b)
        try Self.expectRetry(in: kind, outside: outside, toEndAs: expected)
    }

    /// A change this program made after the write whose answer was lost is newer than another program's change of the
    /// same field made over that write: it is written.
    @Test(arguments: Store.allCases)
    func aChangeMadeAfterAWriteWhoseAnswerWasLostIsWrittenOverAnotherProgramsChange(_ kind: Store) throws {
        let (storage, stored, _) = try Self.storage(in: kind) { writeFromOutside in
            writeFromOutside(#"{"a":3,"b":1}"#)
        }
        storage.wrappedValue.a = 2
        storage.flush()
        storage.wrappedValue.a = 4
        storage.flush()
        #expect(try Self.decoded(stored()) == Pair(a: 4, b: 1))
        #expect(storage.wrappedValue == Pair(a: 4, b: 1))
        #expect(!storage.hasPendingChanges)
    }

    /// The write whose answer was lost never reached the store, and another program changed the same field meanwhile:
    /// this program's retry is the last write of it. A versioned store finds the write's tag missing and makes the
    /// change again; a store that writes on condition of bytes alone cannot tell this from a write made and changed
    /// since, and keeps the other program's.
    @Test(arguments: Store.allCases)
    func aWriteWhoseAnswerWasLostBeforeItWasMadeIsMadeAgainOnAVersionedStore(_ kind: Store) throws {
        let expected = kind == .versioned ? Pair(a: 2, b: 1) : Pair(a: 3, b: 1)
        try Self.expectRetry(in: kind, made: false, outside: #"{"a":3,"b":1}"#, toEndAs: expected)
    }

    /// Another program removed the key after this program's write, whose answer was lost: a versioned store keeps no
    /// tag of a key it no longer holds, so whether the write was made cannot be told, and the change is made again,
    /// whole, where nothing is stored.
    @Test func aWriteWhoseAnswerWasLostOnAKeyRemovedSinceIsMadeAgainOnAVersionedStore() throws {
        let store = VersionedMemoryStore()
        store.writeFromOutside(Self.key, json: #"{"a":1,"b":1}"#)
        let storage = WLStorage(key: Self.key, defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        store.loseNextAnswer(.afterTheWrite) { try? store.remove(key: Self.key) }
        storage.wrappedValue.a = 2
        storage.flush()
        storage.flush()
        #expect(try Self.decoded(store.stored(Self.key)) == Pair(a: 2, b: 1))
        #expect(storage.wrappedValue == Pair(a: 2, b: 1))
        #expect(!storage.hasPendingChanges)
    }

    /// Another program changed another field before this program's write, which went onto that change and lost its
    /// answer, then changed the field the write changed: the retry keeps both of its changes.
    @Test func anotherProgramsChangeMadeBeforeAWriteWhoseAnswerWasLostIsKeptByTheRetry() throws {
        let (storage, stored) = try Self.storageWritingOnto(#"{"a":1,"b":5}"#, thenLosingTheAnswerTo: #"{"a":3,"b":5}"#)
        try Self.expectChangeOfA(in: storage, stored: stored, toEndAs: Pair(a: 3, b: 5))
    }

    /// A field a newer version of the type stored before this program's write, which went onto it and lost its answer,
    /// is kept by the retry, though this version does not know it.
    @Test func aFieldOfAnotherVersionStoredBeforeAWriteWhoseAnswerWasLostIsKeptByTheRetry() throws {
        let (storage, stored) = try Self.storageWritingOnto(
            #"{"a":1,"b":1,"c":7}"#, thenLosingTheAnswerTo: #"{"a":3,"b":1,"c":7}"#)
        storage.wrappedValue.b = 2
        storage.flush()
        storage.flush()
        let held = try JSONSerialization.jsonObject(with: Data(try #require(stored()).utf8)) as? [String: Int]
        #expect(held == ["a": 3, "b": 2, "c": 7])
        #expect(!storage.hasPendingChanges)
    }

    /// Another program changed a field before this program's write, which went onto that change and lost its answer;
    /// a program that read the write then set the field back: its value is the newer, and the retry keeps it.
    @Test func aFieldSetBackOverAWriteWhoseAnswerWasLostKeepsTheValueSetBack() throws {
        let (storage, stored) = try Self.storageWritingOnto(#"{"a":1,"b":5}"#, thenLosingTheAnswerTo: #"{"a":2,"b":1}"#)
        try Self.expectChangeOfA(in: storage, stored: stored, toEndAs: Pair(a: 2, b: 1))
    }

    /// The retry of a write whose answer was lost goes onto another program's change of another field, and loses its
    /// answer too, while another program changes the field written: the last retry keeps both programs' changes.
    @Test func aRetryWhoseAnswerIsLostAgainKeepsOtherProgramsChanges() throws {
        let store = InterceptedStore(feed: .announced)
        store.base.writeUnreported(Self.key, json: #"{"a":1,"b":1}"#)
        let storage = WLStorage(key: Self.key, defaultValue: Pair(a: 0, b: 0), flushInterval: nil, store: store)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        store.afterNextConditionalWrite(losingTheOutcome: true) {
            store.base.writeUnreported(Self.key, json: #"{"a":1,"b":5}"#)
            store.afterNextConditionalWrite(losingTheOutcome: true) {
                store.base.writeUnreported(Self.key, json: #"{"a":3,"b":5}"#)
            }
        }
        storage.wrappedValue.a = 2
        for _ in 0..<3 { storage.flush() }
        let held = try Self.decoded(store.base.stored(Self.key))
        #expect(held == Pair(a: 3, b: 5))
        #expect(eventually(timeout: 60) { storage.wrappedValue == Pair(a: 3, b: 5) }, "holds \(storage.wrappedValue)")
        #expect(!storage.hasPendingChanges)
    }

    /// A flush of every storage of the store is about to take the change into its batch when the storage's own flush
    /// (another thread's, in a program) writes it, and that write loses its answer: the change is written on its own,
    /// not whole in the batch over another program's change of the same field made after the lost write.
    @Test func aChangeWhoseWriteLosesItsAnswerAsAFlushOfEveryStorageTakesItIsNotWrittenInTheBatch() throws {
        let store = InterceptedStore(feed: .announced)
        store.base.writeUnreported(Self.key, json: #"{"a":1,"b":1}"#)
        let clock = ClockWithAHook()
        let storage = WLStorage<Pair>(
            defaultValueClosure: { Pair(a: 0, b: 0) }, flushInterval: nil,
            binding: KeyBinding(key: Self.key, store: store), migrations: [], scheduler: clock)
        try #require(storage.wrappedValue == Pair(a: 1, b: 1))
        storage.wrappedValue.a = 2
        store.afterNextConditionalWrite(losingTheOutcome: true) {
            store.base.writeUnreported(Self.key, json: #"{"a":3,"b":1}"#)
        }
        // The batch, on this thread, reads the clock just before it takes the change: the storage's own flush runs
        // then.
        clock.onNextReading { storage.flush() }
        flushAllStores([store])
        storage.flush()
        let held = try Self.decoded(store.base.stored(Self.key))
        #expect(held == Pair(a: 3, b: 1))
        #expect(!storage.hasPendingChanges)
    }

    /// Another program removed the key after this program's write whose answer was lost, and a check saw the removal:
    /// the change, still pending, is written whole where nothing is stored; where another program stored a value anew,
    /// the fields that value changed since the bytes the write was to replace are kept, as over the write itself.
    @Test(arguments: [nil, #"{"a":3,"b":5}"#])
    func aChangeWhoseWriteLostItsAnswerIsWrittenOnceTheKeyIsRemoved(storedAnew: String?) throws {
        let (storage, stored, store) = try Self.storage(in: .conditional) { writeFromOutside in
            writeFromOutside(#"{"a":2,"b":5}"#)
        }
        storage.wrappedValue.a = 2
        storage.flush()
        try #require(storage.hasPendingChanges)
        try store.remove(key: Self.key)
        storage.cell.checkForExternalChange()
        // The removal forgets the version read, not the write whose outcome is unknown: the retry still knows it.
        try #require(storage.cell.keyBacker?.known.withLock { $0.rare.unsure != nil } == true)
        if let storedAnew { try #require(store as? InterceptedStore).base.writeUnreported(Self.key, json: storedAnew) }
        storage.flush()
        #expect(try Self.decoded(stored()) == (storedAnew == nil ? Pair(a: 2, b: 1) : Pair(a: 3, b: 5)))
        #expect(!storage.hasPendingChanges)
    }

    /// A storage of ``key`` in a store that writes on condition of bytes, where another program stored `before` unseen
    /// (the storage's write is refused, and goes onto it), and stores `after` once that write is made, losing its answer.
    static func storageWritingOnto(
        _ before: String, thenLosingTheAnswerTo after: String
    ) throws -> (WLStorage<Pair>, () -> String?) {
        let (storage, stored, store) = try storage(in: .conditional) { writeFromOutside in writeFromOutside(after) }
        try #require(store as? InterceptedStore).base.writeUnreported(key, json: before)
        return (storage, stored)
    }

    /// Sets `a = 2` in a storage of `kind` whose write loses its answer (made or not) while another program stores
    /// `outside`, flushes twice, and expects the store and the storage to hold `expected`, with nothing pending.
    static func expectRetry(in kind: Store, made: Bool = true, outside: String, toEndAs expected: Pair) throws {
        let (storage, stored, _) = try storage(in: kind, made: made) { writeFromOutside in writeFromOutside(outside) }
        try expectChangeOfA(in: storage, stored: stored, toEndAs: expected)
    }

    /// Sets `a = 2` in `storage`, flushes twice, and expects the store (`stored`) and the storage to hold `expected`,
    /// with nothing pending.
    static func expectChangeOfA(in storage: WLStorage<Pair>, stored: () -> String?, toEndAs expected: Pair) throws {
        storage.wrappedValue.a = 2
        storage.flush()
        storage.flush()
        #expect(try decoded(stored()) == expected)
        #expect(eventually(timeout: 60) { storage.wrappedValue == expected }, "holds \(storage.wrappedValue)")
        #expect(!storage.hasPendingChanges)
    }
}
