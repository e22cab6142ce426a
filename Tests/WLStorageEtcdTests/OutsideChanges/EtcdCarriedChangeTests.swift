import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// The etcd store's feed carries each put's version and bytes, as its watch's events hold them, so that a storage of
/// the key takes another program's write without reading it (the core's rule is checked with a store in memory, in
/// CarryingStoreTests).
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdCarriedChangeTests {
    /// Another program's writes, made by `write` through another spelling of the endpoint while a store of a new
    /// namespace observes its feed, are reported as `expected` after the feed's start; returns the observing store.
    private func feed(
        after write: (WLStorageEtcdStore) throws -> Void, reports expected: [WLStorageFeedEvent]
    ) throws -> WLStorageEtcdStore {
        let namespace = uniqueNamespace()
        let store = try WLStorageEtcdStore(endpoints: [EtcdServer.shared().endpoint], namespace: namespace)
        let events = Lock<[WLStorageFeedEvent]>([])
        let subscription = store.observeCarriedChanges { event in events.withLock { $0.append(event) } }
        defer { subscription?.cancel() }
        try #require(eventually(timeout: 60) { events.withLock { $0 }.contains(.change(.everything)) })
        try write(try WLStorageEtcdStore(endpoints: [EtcdServer.shared().otherSpelling], namespace: namespace))
        let after = { Array(events.withLock { $0 }.drop { $0 == .change(.everything) }) }
        #expect(eventually(timeout: 60) { after().count >= expected.count })
        #expect(after() == expected)
        return store
    }

    @Test func eachPutIsCarriedWithTheKeysVersionAndARemovalIsToBeRead() async throws {
        try await onItsOwnThread {
            let expected: [WLStorageFeedEvent] = [
                .carried(WLStorageCarriedChange(key: "k", version: 1, data: bytes("1"))),
                .carried(WLStorageCarriedChange(key: "k", version: 2, data: bytes("2"))),
                .carried(WLStorageCarriedChange(key: "k", version: 3, data: bytes("3"))),
                .change(.key("k")),
                // Made anew, the key's versions start again.
                .carried(WLStorageCarriedChange(key: "k", version: 1, data: bytes("again"))),
            ]
            let store = try feed(
                after: { writer in
                    for value in ["1", "2", "3"] { try writer.write(key: "k", data: bytes(value)) }
                    try writer.remove(key: "k")
                    try writer.write(key: "k", data: bytes("again"))
                }, reports: expected)
            let read = try #require(try store.readWithVersion(key: "k"))
            #expect(read.data == bytes("again") && read.version == 1)
            #expect(try store.readWithVersion(key: "absent") == nil)
        }
    }

    /// A put of a value of 1 MB comes as a line of the watch's answer in many chunks, held until the line ends; the
    /// small puts around it come whole, each a chunk. Every one is carried with its bytes, in order.
    @Test func aPutWhoseLineComesInManyChunksIsCarriedWhole() async throws {
        try await onItsOwnThread {
            let large = Data((0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let expected: [WLStorageFeedEvent] = [
                .carried(WLStorageCarriedChange(key: "a", version: 1, data: bytes("before"))),
                .carried(WLStorageCarriedChange(key: "b", version: 1, data: large)),
                .carried(WLStorageCarriedChange(key: "a", version: 2, data: bytes("after"))),
            ]
            _ = try feed(
                after: { writer in
                    try writer.write(key: "a", data: bytes("before"))
                    try writer.write(key: "b", data: large)
                    try writer.write(key: "a", data: bytes("after"))
                }, reports: expected)
        }
    }

    /// A storage over the store follows another program's sets, which its feed carries, and its own sets heard back
    /// change nothing.
    @Test func aStorageFollowsAnotherProgramsSetsFromTheFeed() async throws {
        try await onItsOwnThread {
            let namespace = uniqueNamespace()
            let server = try EtcdServer.shared()
            let replica = WLStorage(
                key: "level", defaultValue: 0, flushInterval: 0,
                store: try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace))
            let writer = WLStorage(
                key: "level", defaultValue: 0, flushInterval: 0,
                store: try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace))
            for value in 1...5 {
                writer.wrappedValue = value
                writer.flush()
                #expect(eventuallyHolds(replica, value), "the replica holds \(replica.wrappedValue)")
            }
            replica.wrappedValue = 10
            replica.flush()
            #expect(eventuallyHolds(writer, 10))
            #expect(replica.wrappedValue == 10)
        }
    }
}
