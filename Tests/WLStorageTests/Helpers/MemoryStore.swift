import Foundation

@testable import WLStorage

/// A store in memory with a change feed, whose writes and reads can be told to fail, and that records its batches.
/// Two instances made with `sharing:` hold the same values under the same identity, as two handles of one database.
final class MemoryStore: WLStorageStore {
    final class Contents: Sendable {
        struct State {
            var values: [String: Data] = [:]
            var handlers: [UInt64: @Sendable (WLStorageStoreChange) -> Void] = [:]
            var nextHandler: UInt64 = 0
            var failReads = false
            var failWrites = false
            var batches: [[String]] = []
            /// The keys of each call of `write(_:ifTheyHold:)`, failed or not.
            var conditionalBatches: [[String]] = []
            /// Run once, outside the lock, as the next `write(_:ifTheyHold:)` returns.
            var afterConditionalBatch: (@Sendable () -> Void)?
            /// Whether the next `write(_:ifTheyHold:)` throws once it has stored, as when its answer is lost; or, `nil`,
            /// before it stores anything, as when the server restarts as it is sent.
            var losesConditionalBatchAnswer: Bool? = false
            /// When set, the next `write(_:ifTheyHold:)` writes on condition only that many of its writes, from its start,
            /// then throws, its error saying the others were not sent: a chunked batch whose second chunk fails.
            var conditionalBatchFailsAfter: Int?
            var writes = 0
            /// Calls of `write(key:data:)`, failed or not.
            var writeAttempts = 0
            /// Calls of `write(key:data:ifItHolds:)`, failed or not.
            var conditionalWriteAttempts = 0
            /// How long a conditional write waits before it fails, while writes fail, in microseconds.
            var failingWriteStall: UInt32 = 0
            var reads = 0
            /// 0: no faults; 1: every third write fails; 2: every second write stalls for a moment.
            var faultMode = 0
            var faultCounter = 0
            /// Conditional writes still to fail, before they store anything.
            var conditionalWritesToFail = 0
            /// Run before the next conditional write once the given number of them failed while writes fail (see
            /// ``failWrites(_:)``).
            var afterFailedConditionalWrites: (count: Int, body: @Sendable () -> Void)?
        }
        let state = Lock(State())
    }

    struct Failure: Error {}

    let identity: String
    let contents: Contents

    init(identity: String = "memory:" + UUID().uuidString, sharing other: MemoryStore? = nil) {
        ReportedErrors.install()
        self.identity = other?.identity ?? identity
        self.contents = other?.contents ?? Contents()
    }

    /// A store over the values of `other` with an identity of its own: as another program's handle of the same
    /// database, whose storages have cells of their own in this process.
    init(replicaOf other: MemoryStore) {
        ReportedErrors.install()
        self.identity = "memory:" + UUID().uuidString
        self.contents = other.contents
    }

    func read(key: String) throws -> Data? {
        try contents.state.withLock { state in
            state.reads += 1
            if state.failReads { throw Failure() }
            return state.values[key]
        }
    }

    /// Fails or stalls a write as the fault mode says.
    private func injectFault() throws {
        let (mode, count) = contents.state.withLock { state in
            state.faultCounter += 1
            return (state.faultMode, state.faultCounter)
        }
        switch mode {
        case 1 where count % 3 == 0: throw Failure()
        case 2 where count % 2 == 0: usleep(UInt32(500 + count % 3_000))
        default: break
        }
    }

    func setFaultMode(_ mode: Int) { contents.state.withLock { $0.faultMode = mode } }

    func write(key: String, data: Data) throws {
        contents.state.withLock { $0.writeAttempts += 1 }
        try injectFault()
        try contents.state.withLock { state in
            if state.failWrites { throw Failure() }
            state.writes += 1
            state.values[key] = data
        }
    }

    func create(key: String, data: Data) throws -> Bool {
        try injectFault()
        return try contents.state.withLock { state in
            if state.failWrites { throw Failure() }
            guard state.values[key] == nil else { return false }
            state.writes += 1
            state.values[key] = data
            return true
        }
    }

    func write(_ batch: [WLStorageStoreWrite]) throws {
        try injectFault()
        try contents.state.withLock { state in
            if state.failWrites { throw Failure() }
            state.batches.append(batch.map(\.key).sorted())
            for write in batch { state.values[write.key] = write.data }
        }
    }

    func remove(key: String) throws {
        try contents.state.withLock { state in
            if state.failWrites { throw Failure() }
            state.values[key] = nil
        }
    }

    func keys() throws -> [String] {
        contents.state.withLock { $0.values.keys.sorted() }
    }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        let id = contents.state.withLock { state in
            defer { state.nextHandler += 1 }
            state.handlers[state.nextHandler] = changed
            return state.nextHandler
        }
        return WLStorageSubscription { [contents] in
            let removed = contents.state.withLock { $0.handlers.removeValue(forKey: id) }
            _ = removed
        }
    }

    // MARK: What tests do from outside

    /// Another program's write of `json` under `key`, reported by the feed.
    func writeFromOutside(_ key: String, json: String) {
        contents.state.withLock { $0.values[key] = Data(json.utf8) }
        report(.key(key))
    }

    /// Another program's write of `json` under `key` whose news the feed has not brought yet.
    func writeUnreported(_ key: String, json: String) {
        contents.state.withLock { $0.values[key] = Data(json.utf8) }
    }

    /// Another program's write of `data` under `key` whose news the feed has not brought yet.
    func writeUnreported(_ key: String, data: Data) {
        contents.state.withLock { $0.values[key] = data }
    }

    /// Another program's removal of `key`, reported by the feed.
    func removeFromOutside(_ key: String) {
        contents.state.withLock { $0.values[key] = nil }
        report(.key(key))
    }

    func report(_ change: WLStorageStoreChange) {
        for handler in contents.state.withLock({ Array($0.handlers.values) }) { handler(change) }
    }

    func stored(_ key: String) -> String? {
        contents.state.withLock { $0.values[key] }.map { String(decoding: $0, as: UTF8.self) }
    }

    func failReads(_ fail: Bool) { contents.state.withLock { $0.failReads = fail } }
    func failWrites(_ fail: Bool) { contents.state.withLock { $0.failWrites = fail } }
    /// Makes writes fail, each conditional one after `seconds`, as a store that is away fails at its timeout.
    func failWritesAfterATimeout(of seconds: Double) {
        contents.state.withLock { state in
            state.failWrites = true
            state.failingWriteStall = UInt32(seconds * 1_000_000)
        }
    }
    /// Runs `body`, outside the lock, as the next conditional write begins once `count` of them have failed while
    /// writes fail.
    func afterFailedConditionalWrites(_ count: Int, _ body: @escaping @Sendable () -> Void) {
        contents.state.withLock { $0.afterFailedConditionalWrites = (count, body) }
    }
    /// Makes the next `count` conditional writes fail before they store anything.
    func failConditionalWrites(_ count: Int) { contents.state.withLock { $0.conditionalWritesToFail = count } }
    var batches: [[String]] { contents.state.withLock { $0.batches } }
    var conditionalBatches: [[String]] { contents.state.withLock { $0.conditionalBatches } }
    /// Runs `body`, outside the lock, as the next write of a batch on condition returns.
    func afterConditionalBatch(_ body: @escaping @Sendable () -> Void) {
        contents.state.withLock { $0.afterConditionalBatch = body }
    }
    /// Has the next write of a batch on condition write its first `count` writes on condition, then throw.
    func failTheNextConditionalBatch(after count: Int) {
        contents.state.withLock { $0.conditionalBatchFailsAfter = count }
    }
    /// Has the next write of a batch on condition throw, after it stored what it stores (its answer lost) or before.
    func loseTheAnswerOfTheNextConditionalBatch(afterStoring: Bool = true) {
        contents.state.withLock { $0.losesConditionalBatchAnswer = afterStoring ? true : nil }
    }
    var feedCount: Int { contents.state.withLock { $0.handlers.count } }
    var reads: Int { contents.state.withLock { $0.reads } }
    var writeAttempts: Int { contents.state.withLock { $0.writeAttempts } }
    /// Writes that stored, whole or on condition.
    var writes: Int { contents.state.withLock { $0.writes } }
    var conditionalWriteAttempts: Int { contents.state.withLock { $0.conditionalWriteAttempts } }
}

extension MemoryStore: WLStorageConditionalStore {
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        contents.state.withLock { $0.conditionalWriteAttempts += 1 }
        try injectFault()
        // The body planned for after the last failed write runs, after the lock, before the next write.
        let planned = contents.state.withLock { state -> (@Sendable () -> Void)? in
            guard let (count, body) = state.afterFailedConditionalWrites, count == 0 else { return nil }
            state.afterFailedConditionalWrites = nil
            return body
        }
        planned?()
        let stall = contents.state.withLock { $0.failWrites ? $0.failingWriteStall : 0 }
        if stall > 0 { usleep(stall) }
        return try contents.state.withLock { state in
            if state.failWrites {
                if let (count, body) = state.afterFailedConditionalWrites, count > 0 {
                    state.afterFailedConditionalWrites = (count - 1, body)
                }
                throw Failure()
            }
            if state.conditionalWritesToFail > 0 {
                state.conditionalWritesToFail -= 1
                throw Failure()
            }
            guard state.values[key] == expected else { return false }
            state.writes += 1
            state.values[key] = data
            return true
        }
    }

    /// Writes on condition in one step, recorded; while writes fail, it fails after the stall a conditional write takes.
    func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
        contents.state.withLock { $0.conditionalBatches.append(batch.map(\.key)) }
        try injectFault()
        let stall = contents.state.withLock { $0.failWrites ? $0.failingWriteStall : 0 }
        if stall > 0 { usleep(stall) }
        let (written, after, lost) = try contents.state.withLock { state in
            if state.failWrites { throw Failure() }
            if state.losesConditionalBatchAnswer == nil {
                state.losesConditionalBatchAnswer = false
                // Nothing was sent, as its error says.
                var error = WLStorageError(code: .writeFailed, message: "the batch was not sent")
                error.storedWrites = 0
                throw error
            }
            defer { (state.afterConditionalBatch, state.losesConditionalBatchAnswer) = (nil, false) }
            if let count = state.conditionalBatchFailsAfter {
                state.conditionalBatchFailsAfter = nil
                let answers = zip(batch, expected).prefix(count).map { write, expected in
                    guard state.values[write.key] == expected else { return false }
                    state.writes += 1
                    state.values[write.key] = write.data
                    return true
                }
                // The first chunk was answered; the second failed before any of it was sent.
                var error = WLStorageError(code: .writeFailed, message: "the batch's second chunk failed")
                (error.storedWrites, error.storedAnswers) = (count, answers)
                throw error
            }
            return (
                zip(batch, expected).map { write, expected in
                    guard state.values[write.key] == expected else { return false }
                    state.writes += 1
                    state.values[write.key] = write.data
                    return true
                }, state.afterConditionalBatch, state.losesConditionalBatchAnswer
            )
        }
        after?()
        if lost == true { throw Failure() }
        return written
    }
}

/// A custom backer with a change feed: a value in memory that tests change from outside.
final class ObservableMemoryBacker: WLStorageObservableBacker, Sendable {
    let key = "observed"
    private let state = Lock<(value: Int?, handlers: [UInt64: @Sendable () -> Void], next: UInt64)>((nil, [:], 0))

    init(stored: Int?) {
        ReportedErrors.install()
        state.withLock { $0.value = stored }
    }

    func read(defaultValueClosure: () -> Int) -> Int { state.withLock { $0.value } ?? defaultValueClosure() }
    func write(value: Int) { state.withLock { $0.value = value } }

    func observeChanges(_ changed: @escaping @Sendable () -> Void) -> WLStorageSubscription {
        let id = state.withLock { state in
            defer { state.next += 1 }
            state.handlers[state.next] = changed
            return state.next
        }
        return WLStorageSubscription { [self] in
            let removed = self.state.withLock { $0.handlers.removeValue(forKey: id) }
            _ = removed
        }
    }

    func setFromOutside(_ value: Int?) {
        state.withLock { $0.value = value }
        for handler in state.withLock({ Array($0.handlers.values) }) { handler() }
    }

    var stored: Int? { state.withLock { $0.value } }
}
