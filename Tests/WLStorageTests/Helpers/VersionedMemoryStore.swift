// Written against the package's public API alone, as a store of a program's own would be: `.ci/run` type-checks this
// file outside the package, where nothing but the public API is seen.
import Foundation
import Testing
import WLStorage

/// A store in memory that keeps, as the PostgreSQL store does, a version for each key (one more at every write) and the
/// tags of the last conditional writes, so that updates of its keys are made exactly once; and whose next conditional
/// write can lose its answer: before the write is made, or after, with another replica's write in between.
final class VersionedMemoryStore: WLStorageVersionedStore, @unchecked Sendable {  // `state` under `lock`
    /// When the next conditional write loses its answer.
    enum Loss: Sendable, CustomTestStringConvertible {
        /// The write is not made; `meanwhile` runs, and the write throws.
        case beforeTheWrite
        /// The write is made; `meanwhile` runs, and the write throws.
        case afterTheWrite

        var testDescription: String {
            switch self {
            case .beforeTheWrite: "before the write"
            case .afterTheWrite: "after the write"
            }
        }
    }

    struct Row {
        var data: Data
        var version: Int64
        var tags: [String] = []
    }

    struct LostAnswer: Error {}

    private struct State {
        var rows: [String: Row] = [:]
        var loss: (Loss, @Sendable () -> Void)?
        var handlers: [Int: @Sendable (WLStorageStoreChange) -> Void] = [:]
        var nextHandler = 0
    }

    let identity = "versioned-memory:" + UUID().uuidString
    /// How many tags a row keeps.
    let capacity: Int
    /// An `NSLock`, which ThreadSanitizer sees (`Mutex` on Linux locks with futexes it does not observe).
    private let lock = NSLock()
    nonisolated(unsafe) private var state = State()

    init(capacity: Int = 64) {
        self.capacity = capacity
    }

    // MARK: The store

    func read(key: String) throws -> Data? { withState { $0.rows[key]?.data } }

    /// A plain write: one more to the version, the tags left as they are.
    func write(key: String, data: Data) throws {
        withState { state in
            let version = (state.rows[key]?.version ?? 0) + 1
            state.rows[key] = Row(data: data, version: version, tags: state.rows[key]?.tags ?? [])
        }
    }

    func remove(key: String) throws { withState { $0.rows[key] = nil } }
    func keys() throws -> [String] { withState { $0.rows.keys.sorted() } }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        let id = withState { state in
            defer { state.nextHandler += 1 }
            state.handlers[state.nextHandler] = changed
            return state.nextHandler
        }
        return WLStorageSubscription { [self] in
            let removed = self.withState { $0.handlers.removeValue(forKey: id) }
            _ = removed  // released after the lock
        }
    }

    /// Writes on condition of the bytes (as a store that keeps no version does).
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        try conditionalWrite(key: key, data: data, tag: nil) { $0?.data == expected }
    }

    func readVersioned(key: String) throws -> WLStorageVersionedRead {
        guard let row = row(key) else { return .absent }
        return .found(row.data, version: row.version)
    }

    func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult
    {
        try conditionalWrite(key: key, data: data, tag: tag.text) { $0?.version == version } ? .stored : .refused
    }

    func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
        row(key).map {
            WLStorageTagTrace(
                version: $0.version, tagFound: $0.tags.contains(tag.text), tagsKept: $0.tags.count, capacity: capacity)
        }
    }

    // MARK: What tests do from outside

    /// Makes the next conditional write lose its answer at `loss`, running `meanwhile` (another replica's write) then.
    func loseNextAnswer(_ loss: Loss, meanwhile: @escaping @Sendable () -> Void) {
        withState { $0.loss = (loss, meanwhile) }
    }

    /// Another replica's write, as a set is: one more to the version, the tags left as they are.
    func writeFromOutside(_ key: String, json: String) {
        try? write(key: key, data: Data(json.utf8))
        report(.key(key))
    }

    /// Another replica's increment of the Int under `key`, made as its update makes it: on condition, tagged.
    func incrementFromOutside(_ key: String) {
        let current = row(key)
        let value = current.flatMap { Int(String(decoding: $0.data, as: UTF8.self)) } ?? 0
        let tag = "other-\(UUID().uuidString)"
        withState { state in
            state.rows[key] = Row(
                data: Data(String(value + 1).utf8), version: (current?.version ?? 0) + 1,
                tags: Array(([tag] + (current?.tags ?? [])).prefix(capacity)))
        }
        report(.key(key))
    }

    func stored(_ key: String) -> String? {
        withState { $0.rows[key] }.map { String(decoding: $0.data, as: UTF8.self) }
    }

    func row(_ key: String) -> Row? { withState { $0.rows[key] } }

    private func withState<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&state) }
    }

    private func report(_ change: WLStorageStoreChange) {
        for handler in withState({ Array($0.handlers.values) }) { handler(change) }
    }

    /// Writes `data` when `holds` says the row is the one expected, tagged with `tag`, losing the answer as planned.
    private func conditionalWrite(key: String, data: Data, tag: String?, when holds: (Row?) -> Bool) throws -> Bool {
        let loss = withState { state in
            defer { state.loss = nil }
            return state.loss
        }
        if let (when, meanwhile) = loss, case .beforeTheWrite = when {
            meanwhile()
            throw LostAnswer()
        }
        let stored = withState { state -> Bool in
            guard holds(state.rows[key]) else { return false }
            let row = state.rows[key]
            state.rows[key] = Row(
                data: data, version: (row?.version ?? 0) + 1,
                tags: Array(((tag.map { [$0] } ?? []) + (row?.tags ?? [])).prefix(capacity)))
            return true
        }
        if let (when, meanwhile) = loss, case .afterTheWrite = when {
            meanwhile()
            throw LostAnswer()
        }
        return stored
    }
}
