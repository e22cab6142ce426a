import Foundation
import Synchronization
import WLStorage
import WLStorageEtcd

/// An etcd store, as it is, that prints what became of the updates' writes whose answers were lost: `resent` each time
/// an update sends a tagged write again (its answer was lost), and `traced found` or `traced not found` each time it
/// asks the key about the write's tag.
final class WriteOutcomePrinter: WLStorageVersionedStore {
    private let base: WLStorageEtcdStore
    private let lastTag = Mutex<WLStorageWriteTag?>(nil)

    init(_ base: WLStorageEtcdStore) {
        self.base = base
    }

    var identity: String { base.identity }
    func read(key: String) throws -> Data? { try base.read(key: key) }
    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func write(_ batch: [WLStorageStoreWrite]) throws { try base.write(batch) }
    func remove(key: String) throws { try base.remove(key: key) }
    func remove(key: String, ifItHolds data: Data) throws -> Bool { try base.remove(key: key, ifItHolds: data) }
    func keys() throws -> [String] { try base.keys() }

    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription? {
        base.observeChanges(changed)
    }

    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        try base.write(key: key, data: data, ifItHolds: expected)
    }

    var settlesLostAnswers: Bool { base.settlesLostAnswers }
    func readVersioned(key: String) throws -> WLStorageVersionedRead { try base.readVersioned(key: key) }

    func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult
    {
        let resent = lastTag.withLock { last in
            defer { last = tag }
            return last == tag
        }
        if resent { say("resent") }
        return try base.write(key: key, data: data, ifVersion: version, tag: tag)
    }

    func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
        let trace = try base.trace(of: tag, key: key)
        say(trace?.tagFound == true ? "traced found" : "traced not found")
        return trace
    }
}
