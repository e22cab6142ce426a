// Written against the package's public API alone, as a store of a program's own would be: a test type-checks this
// file outside the package, where nothing but the public API is seen.
import Dispatch
import Foundation
import WLStorage

/// A store in memory whose feed carries each change's version and bytes (a ``WLStorageCarryingStore``), as another
/// program's writes would be heard from a database that sends them; it counts the reads of each key.
final class CarryingMemoryStore: WLStorageCarryingStore, @unchecked Sendable {  // `state` under `lock`
    private struct State {
        var rows: [String: (data: Data, version: Int64)] = [:]
        var reads: [String: Int] = [:]
        /// The version each read found (0: nothing stored), by key.
        var versionsRead: [String: [Int64]] = [:]
        var handlers: [Int: @Sendable (WLStorageFeedEvent) -> Void] = [:]
        var nextHandler = 0
        var heldReads: [String: HeldRead] = [:]
        var afterWrites: [String: @Sendable () -> Void] = [:]
    }

    let identity = "carrying-memory:" + UUID().uuidString
    private let lock = NSLock()
    nonisolated(unsafe) private var state = State()

    func read(key: String) throws -> Data? { try readWithVersion(key: key)?.data }

    func readWithVersion(key: String) throws -> (data: Data, version: Int64)? {
        let (row, held) = withState { state in
            state.reads[key, default: 0] += 1
            state.versionsRead[key, default: []].append(state.rows[key]?.version ?? 0)
            return (state.rows[key], state.heldReads.removeValue(forKey: key))
        }
        held?.hold()
        return row
    }

    /// Whether ``writeWithVersion(key:data:)`` returns the version written (`false`: `nil`, as a store that cannot).
    let saysWrittenVersions: Bool

    init(saysWrittenVersions: Bool = true) {
        self.saysWrittenVersions = saysWrittenVersions
    }

    func write(key: String, data: Data) throws {
        _ = try writeWithVersion(key: key, data: data)
    }

    /// A write, whose report the feed sends before it returns.
    func writeWithVersion(key: String, data: Data) throws -> Int64? {
        let version = store(key, data)
        report(.carried(WLStorageCarriedChange(key: key, version: version, data: data)))
        withState { $0.afterWrites.removeValue(forKey: key) }?()
        return saysWrittenVersions ? version : nil
    }

    func remove(key: String) throws {
        withState { $0.rows[key] = nil }
        report(.change(.key(key)))
    }

    func keys() throws -> [String] { withState { $0.rows.keys.sorted() } }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        observeCarriedChanges { event in
            switch event {
            case .change(let change): changed(change)
            case .carried(let change): changed(.key(change.key))
            }
        }
    }

    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription? {
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

    // MARK: What tests do from outside

    /// Another program's write of `json`, reported with its bytes (`carried`), or with its version only.
    func writeFromOutside(_ key: String, json: String, carried: Bool = true) {
        let data = Data(json.utf8)
        let version = store(key, data)
        report(.carried(WLStorageCarriedChange(key: key, version: version, data: carried ? data : nil)))
    }

    /// Another program's write of `json` that the feed never reports (a report lost on the way).
    func writeUnreported(_ key: String, json: String) {
        _ = store(key, Data(json.utf8))
    }

    /// Another program's removal of `key` that the feed never reports (an operator's `DELETE` in a database whose
    /// notifications come from the writing programs): the key's versions start again with its next write.
    func removeUnreported(_ key: String) {
        withState { $0.rows[key] = nil }
    }

    /// Runs `body` once the next write of `key` through the store is stored and reported, before the write returns:
    /// what `body` does comes between the write and what the storage makes of it.
    func afterNextWrite(of key: String, _ body: @escaping @Sendable () -> Void) {
        withState { $0.afterWrites[key] = body }
    }

    /// Holds the next read of `key` once it has taken what the key holds, until the read returned is released: writes
    /// made and reported meanwhile are heard while the read that missed them is in flight.
    func holdNextRead(of key: String) -> HeldRead {
        let held = HeldRead()
        withState { $0.heldReads[key] = held }
        return held
    }

    /// A read held by ``holdNextRead(of:)``.
    final class HeldRead: Sendable {
        private let reached = DispatchSemaphore(value: 0)
        private let released = DispatchSemaphore(value: 0)

        /// Whether the read got to its hold within `timeout` seconds.
        func waitUntilReached(timeout: Double = 30) -> Bool {
            reached.wait(timeout: .now() + timeout) == .success
        }

        /// Lets the read return (a read never released returns after a minute, so that no test hangs on it).
        func release() { released.signal() }

        fileprivate func hold() {
            reached.signal()
            _ = released.wait(timeout: .now() + 60)
        }
    }

    /// How many times `key` was read.
    func reads(of key: String) -> Int { withState { $0.reads[key, default: 0] } }

    /// How many reads of `key` found one of `versions` stored: a storage's own writes read back, counted apart from a
    /// read that a check may make for another program's write (when two checks share its report, say).
    func reads(of key: String, finding versions: ClosedRange<Int64>) -> Int {
        withState { $0.versionsRead[key, default: []].filter(versions.contains).count }
    }

    private func store(_ key: String, _ data: Data) -> Int64 {
        withState { state in
            let version = (state.rows[key]?.version ?? 0) + 1
            state.rows[key] = (data, version)
            return version
        }
    }

    private func report(_ event: WLStorageFeedEvent) {
        for handler in withState({ Array($0.handlers.values) }) { handler(event) }
    }

    private func withState<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&state) }
    }
}
