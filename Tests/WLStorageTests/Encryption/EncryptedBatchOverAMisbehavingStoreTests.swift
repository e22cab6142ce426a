import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

/// The flush of every storage of an encrypted store over a custom store that writes on condition and misbehaves in its
/// batch calls (reads of many keys answered with the wrong number of values or a foreign error, a batch's error that
/// counts its writes wrong): nothing crashes, nothing is reported written that is not, and every object is written,
/// with the field another program changed meanwhile, unheard of.
@Suite(.onTestThreads) struct EncryptedBatchOverAMisbehavingStoreTests {
    struct Pair: Codable, Sendable, Equatable {
        var a = 0
        var b = 0
    }

    enum Fault: String, CaseIterable, Sendable {
        case readsOneKeyTooFew, readsOneKeyTooMany, readThrowsAForeignError
        case batchThrowsAForeignErrorAfterStoring, batchSaysMinusOneWereSent, batchSaysMoreAnswersThanWrites
        case batchAnswersTooFew
    }

    struct ForeignError: Error {}

    /// A custom store over a ``MemoryStore``, whose batch calls misbehave once as `fault` says.
    final class MisbehavingStore: WLStorageConditionalStore {
        let base: MemoryStore
        let fault: Lock<Fault?>
        /// Keys whose reads fail with the error given: a row too large to read, a key the store cannot hold.
        let unreadable = Lock<[String: WLStorageError]>([:])
        /// A failure that every read and write throws while it is set (a store away, say).
        let away = Lock<WLStorageError?>(nil)
        /// The keys of each read of many keys.
        let keyReads = Lock<[[String]]>([])
        var identity: String { base.identity }

        init(_ base: MemoryStore, fault: Fault? = nil) {
            self.base = base
            self.fault = Lock(fault)
        }

        func read(key: String) throws -> Data? {
            if var error = away.withLock({ $0 }) {
                error.key = key
                throw error
            }
            if let error = unreadable.withLock({ $0[key] }) { throw error }
            return try base.read(key: key)
        }
        func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
        func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
        func write(_ batch: [WLStorageStoreWrite]) throws { try base.write(batch) }
        func remove(key: String) throws { try base.remove(key: key) }
        func keys() throws -> [String] { try base.keys() }
        func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
            base.observeChanges(changed)
        }
        func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
            if let error = away.withLock({ $0 }) { throw error }
            return try base.write(key: key, data: data, ifItHolds: expected)
        }

        /// Takes the fault if it is one of `faults`, once.
        private func take(_ faults: Fault...) -> Fault? {
            fault.withLock { fault in
                guard let taken = fault, faults.contains(taken) else { return nil }
                fault = nil
                return taken
            }
        }

        func read(keys: [String]) throws -> [Data?] {
            keyReads.withLock { $0.append(keys) }
            if let error = away.withLock({ $0 }) { throw error }
            let values = try keys.map { try read(key: $0) }
            switch take(.readsOneKeyTooFew, .readsOneKeyTooMany, .readThrowsAForeignError) {
            case .readsOneKeyTooFew: return Array(values.dropLast())
            case .readsOneKeyTooMany: return values + [nil]
            case .readThrowsAForeignError: throw ForeignError()
            default: return values
            }
        }

        func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
            if let error = away.withLock({ $0 }) { throw error }
            let taken = take(
                .batchThrowsAForeignErrorAfterStoring, .batchSaysMinusOneWereSent, .batchSaysMoreAnswersThanWrites,
                .batchAnswersTooFew)
            switch taken {
            case .batchSaysMinusOneWereSent, .batchSaysMoreAnswersThanWrites:
                var error = WLStorageError(code: .writeFailed, message: "the batch failed")
                let more = taken == .batchSaysMoreAnswersThanWrites
                (error.storedWrites, error.storedAnswers) = more ? (batch.count + 3, []) : (-1, nil)
                throw error
            default: break
            }
            let answers = try base.write(batch, ifTheyHold: expected)
            switch taken {
            case .batchThrowsAForeignErrorAfterStoring: throw ForeignError()
            case .batchAnswersTooFew: return Array(answers.dropLast())
            default: return answers
            }
        }
    }

    @Test(arguments: Fault.allCases)
    func everyObjectIsWrittenWithTheFieldAnotherProgramChanged(fault: Fault) throws {
        let memory = MemoryStore()
        let custom = MisbehavingStore(memory, fault: fault)
        let key = try WLStorageEncryptionKey.random()
        let encrypted = custom.encrypted(with: key)
        let names = (0..<6).map { "pair\($0)" }
        for name in names { try encrypted.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let storages = names.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: encrypted) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }
        // Another program (the same key) changed the other field of two objects, unheard of.
        let other = MemoryStore().encrypted(with: key)
        for name in ["pair1", "pair4"] {
            try other.write(key: name, data: Data(#"{"a":0,"b":7}"#.utf8))
            memory.writeUnreported(name, data: try #require(try other.base.read(key: name)))
        }

        flushAllStores([encrypted])
        #expect(
            eventually {
                if storages.contains(where: \.hasPendingChanges) { flushAllStores([encrypted]) }
                return storages.allSatisfy { !$0.hasPendingChanges }
            }, "\(storages.compactMap(\.lastError).prefix(2))")
        #expect(custom.fault.withLock { $0 } == nil, "the fault was met")
        for (index, name) in names.enumerated() {
            let stored = try JSONDecoder().decode(Pair.self, from: try #require(try encrypted.read(key: name)))
            #expect(stored == Pair(a: index + 1, b: ["pair1", "pair4"].contains(name) ? 7 : 0), "\(name)")
        }
    }

    /// One key of the batch that cannot be read (a row too large; on PostgreSQL, a key with a NUL character too) fails
    /// the read of all the batch's keys: the others are read again without it and written in one batch; its object
    /// stays pending, reported.
    @Test func aKeyThatCannotBeReadLeavesOnlyItsObjectOutOfTheBatch() throws {
        let memory = MemoryStore()
        let custom = MisbehavingStore(memory)
        let encrypted = custom.encrypted(with: try .random())
        let names = (0..<6).map { "pair\($0)" }
        for name in names { try encrypted.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let storages = names.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: encrypted) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        custom.unreadable.withLock { $0 = ["pair3": Self.tooLarge("pair3")] }
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }

        flushAllStores([encrypted])
        for (index, storage) in storages.enumerated() where index != 3 {
            #expect(!storage.hasPendingChanges, "\(storage.key): \(storage.lastError?.message ?? "")")
            let stored = try JSONDecoder().decode(Pair.self, from: try #require(try encrypted.read(key: storage.key)))
            #expect(stored == Pair(a: index + 1), "\(storage.key)")
        }
        #expect(storages[3].hasPendingChanges && storages[3].lastError?.code == .valueTooLarge)
        #expect(memory.conditionalBatches == [["pair0", "pair1", "pair2", "pair4", "pair5"]])
        #expect(custom.keyReads.withLock { $0 } == [names, names.filter { $0 != "pair3" }])
    }

    /// A row too large to read.
    static func tooLarge(_ key: String) -> WLStorageError {
        WLStorageError(code: .valueTooLarge, message: "the row is too large", key: key)
    }

    /// Six objects stored, and the encrypted store's batch on condition over `custom` (each write expects them).
    static func batchOfSix(over custom: MisbehavingStore) throws -> (
        store: WLStorageEncryptedStore, batch: [WLStorageStoreWrite], expected: [Data?]
    ) {
        let encrypted = custom.encrypted(with: try .random())
        let names = (0..<6).map { "pair\($0)" }
        for name in names { try encrypted.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let batch = names.map { WLStorageStoreWrite(key: $0, data: Data(#"{"a":1,"b":0}"#.utf8)) }
        return (encrypted, batch, names.map { _ in Data(#"{"a":0,"b":0}"#.utf8) })
    }

    /// Two keys of the batch whose rows are too large to read, each failing the read of the keys in its turn: the others
    /// are read again without them, once each time, and written in one batch; the two are answered not written, and
    /// their bytes are left as they were.
    @Test func keysThatCannotBeReadAreLeftOutAndTheOthersWrittenInOneBatch() throws {
        let memory = MemoryStore()
        let custom = MisbehavingStore(memory)
        let (encrypted, batch, expected) = try Self.batchOfSix(over: custom)
        let before = try memory.read(key: "pair4")
        custom.unreadable.withLock { $0 = ["pair1": Self.tooLarge("pair1"), "pair4": Self.tooLarge("pair4")] }
        let conditional = try #require(Stores.capabilities(of: encrypted).conditional)

        let answers = try conditional.write(batch, ifTheyHold: expected)
        #expect(answers == [true, false, true, true, false, true])
        let names = batch.map(\.key)
        #expect(
            custom.keyReads.withLock { $0 }
                == [names, names.filter { $0 != "pair1" }, names.filter { $0 != "pair1" && $0 != "pair4" }])
        #expect(memory.conditionalBatches == [["pair0", "pair2", "pair3", "pair5"]])
        #expect(try memory.read(key: "pair4") == before)
        custom.unreadable.withLock { $0 = [:] }
        #expect(try encrypted.read(key: "pair0") == batch[0].data)
        #expect(try encrypted.read(key: "pair1") == expected[1])
    }

    /// A batch that fails after a key was left out (its answer lost): the error says the key left out was not written,
    /// and the others not known.
    @Test func aBatchFailingAfterAKeyWasLeftOutSaysThatKeyWasNotWritten() throws {
        let memory = MemoryStore()
        let custom = MisbehavingStore(memory, fault: .batchThrowsAForeignErrorAfterStoring)
        let (encrypted, batch, expected) = try Self.batchOfSix(over: custom)
        custom.unreadable.withLock { $0 = ["pair3": Self.tooLarge("pair3")] }
        let conditional = try #require(Stores.capabilities(of: encrypted).conditional)

        let error = try #require(throws: WLStorageError.self) { try conditional.write(batch, ifTheyHold: expected) }
        #expect(error.storedAnswers == [nil, nil, nil, false, nil, nil])
        #expect(error.storedWrites == batch.count)
        #expect(memory.conditionalBatches == [["pair0", "pair1", "pair2", "pair4", "pair5"]])
    }

    /// How a read of many keys fails other than for a value too large: a store away, naming its first key with the
    /// cause (as etcd's store does) or naming no key (as PostgreSQL's does); a system call's `errno`; a key the store
    /// cannot hold (as PostgreSQL's store refuses a key with a NUL character).
    enum ReadFailure: String, CaseIterable, Sendable {
        case awayNamingAKeyWithItsCause, awayNamingNoKey, withErrno, aKeyTheStoreCannotHold

        var error: WLStorageError {
            switch self {
            case .awayNamingAKeyWithItsCause:
                WLStorageError(
                    code: .readFailed, message: "no endpoint answered", key: "pair0", underlying: ForeignError())
            case .awayNamingNoKey:
                WLStorageError(code: .readFailed, message: "the connection was lost", underlying: ForeignError())
            case .withErrno: WLStorageError(code: .readFailed, message: "the read failed", key: "pair0", errno: EIO)
            case .aKeyTheStoreCannotHold:
                WLStorageError(code: .readFailed, message: "the store cannot hold the key", key: "pair2")
            }
        }
    }

    /// A read of the batch's keys that fails other than for a value too large (a store away, say): nothing is sent, it
    /// says so, and the keys are not read again, neither one by one nor without the key its error names.
    @Test(arguments: ReadFailure.allCases)
    func aReadFailingOtherThanForAValueTooLargeSendsNothingAndReadsNoKeyAgain(failure: ReadFailure) throws {
        let memory = MemoryStore()
        let custom = MisbehavingStore(memory)
        let (encrypted, batch, expected) = try Self.batchOfSix(over: custom)
        custom.away.withLock { $0 = failure.error }
        let conditional = try #require(Stores.capabilities(of: encrypted).conditional)

        let error = try #require(throws: WLStorageError.self) { try conditional.write(batch, ifTheyHold: expected) }
        #expect(error.storedWrites == 0)
        #expect(error.code == .readFailed && error.message == failure.error.message)
        #expect(custom.keyReads.withLock { $0 } == [batch.map(\.key)])
        #expect(memory.conditionalBatches.isEmpty)
    }

    /// A flush of every storage while the store is away: the batch's read fails once, and every object stays pending,
    /// reported, its bytes as they were.
    @Test func aStoreAwayLeavesEveryObjectPendingAndReported() throws {
        let memory = MemoryStore()
        let custom = MisbehavingStore(memory)
        let encrypted = custom.encrypted(with: try .random())
        let names = (0..<6).map { "pair\($0)" }
        for name in names { try encrypted.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let storages = names.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: encrypted) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        let before = try names.map { try memory.read(key: $0) }
        custom.away.withLock { $0 = ReadFailure.awayNamingAKeyWithItsCause.error }
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }

        flushAllStores([encrypted])
        #expect(storages.allSatisfy { $0.hasPendingChanges && $0.lastError != nil })
        #expect(try names.map { try memory.read(key: $0) } == before)
        #expect(custom.keyReads.withLock { $0 } == [names])
        #expect(memory.conditionalBatches.isEmpty)
    }
}
