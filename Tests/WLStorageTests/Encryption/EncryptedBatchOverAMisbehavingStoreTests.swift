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
        /// A key whose reads fail as a row too large to read would.
        let unreadable = Lock<String?>(nil)
        var identity: String { base.identity }

        init(_ base: MemoryStore, fault: Fault? = nil) {
            self.base = base
            self.fault = Lock(fault)
        }

        func read(key: String) throws -> Data? {
            guard key != unreadable.withLock({ $0 }) else {
                throw WLStorageError(code: .valueTooLarge, message: "the row is too large", key: key)
            }
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
            try base.write(key: key, data: data, ifItHolds: expected)
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
            let values = try keys.map { try read(key: $0) }
            switch take(.readsOneKeyTooFew, .readsOneKeyTooMany, .readThrowsAForeignError) {
            case .readsOneKeyTooFew: return Array(values.dropLast())
            case .readsOneKeyTooMany: return values + [nil]
            case .readThrowsAForeignError: throw ForeignError()
            default: return values
            }
        }

        func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
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
    /// the read of all the batch's keys: that object stays pending, reported, and the others are written, each on its
    /// own rather than in the batch, at every flush of every storage while that key stays as it is.
    @Test func aKeyThatCannotBeReadLeavesOnlyItsObjectOutOfTheBatch() throws {
        let memory = MemoryStore()
        let custom = MisbehavingStore(memory)
        let encrypted = custom.encrypted(with: try .random())
        let names = (0..<6).map { "pair\($0)" }
        for name in names { try encrypted.write(key: name, data: Data(#"{"a":0,"b":0}"#.utf8)) }
        let storages = names.map { WLStorage(key: $0, defaultValue: Pair(), flushInterval: nil, store: encrypted) }
        #expect(storages.allSatisfy { $0.wrappedValue == Pair() })
        #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
        custom.unreadable.withLock { $0 = "pair3" }
        for (index, storage) in storages.enumerated() { storage.wrappedValue.a = index + 1 }

        flushAllStores([encrypted])
        for (index, storage) in storages.enumerated() where index != 3 {
            #expect(!storage.hasPendingChanges, "\(storage.key): \(storage.lastError?.message ?? "")")
            let stored = try JSONDecoder().decode(Pair.self, from: try #require(try encrypted.read(key: storage.key)))
            #expect(stored == Pair(a: index + 1), "\(storage.key)")
        }
        #expect(storages[3].hasPendingChanges && storages[3].lastError?.code == .valueTooLarge)
        withKnownIssue(
            """
            The read of the batch's keys (read(keys:)) fails as a whole for one key it cannot read, and the encrypted \
            store then sends none of the batch: every object goes to its own write, a round trip each
            """
        ) {
            #expect(memory.conditionalBatches == [["pair0", "pair1", "pair2", "pair4", "pair5"]])
        }
    }
}
