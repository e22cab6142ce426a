// What every store keeps of the contract of `WLStorageStore` (and of `WLStorageConditionalStore` and
// `WLStorageVersionedStore` when it conforms to them), checked the same way on every store: the directory, its
// wrappers, the test stores, PostgreSQL. Written against the public API alone, as a store's author would use it.
import Foundation
import Testing
import WLStorage

/// The store contract's checks.
public enum StoreContract {
    /// Checks `store`, which must hold nothing yet, against the contract of what it conforms to; `other` is a second
    /// instance of the same store (the same place, made anew), as another program would have it. When
    /// `writeElsewhere` is given, the store's feed must report a write it makes (another program's). `unlisted` are
    /// the keys of ``unusualKeys`` that the store says its `keys()` does not list (a directory's keys stored under
    /// their hash).
    public static func check(
        _ store: any WLStorageStore, other: any WLStorageStore, unlisted: Set<String> = [],
        writeElsewhere: ((_ key: String, _ data: Data) throws -> Void)? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(!store.identity.isEmpty, "an identity", sourceLocation: sourceLocation)
        #expect(
            store.identity == other.identity, "two instances of one store have one identity",
            sourceLocation: sourceLocation)
        try checkBytes(store, other: other, unlisted: unlisted, sourceLocation: sourceLocation)
        if let conditional = store as? any WLStorageConditionalStore {
            try checkConditionalWrites(conditional, sourceLocation: sourceLocation)
        }
        if let versioned = store as? any WLStorageVersionedStore {
            try checkVersionedWrites(versioned, sourceLocation: sourceLocation)
        }
        if let writeElsewhere {
            try checkFeed(store, writeElsewhere: writeElsewhere, sourceLocation: sourceLocation)
        }
    }

    /// Keys that a store must keep apart and give back as they were written.
    public static let unusualKeys = [
        "plain", "with space", "a/b", "../up", ".hidden", "ünïcödé", "emoji-🙂", String(repeating: "k", count: 200),
    ]

    private static func bytes(_ text: String) -> Data { Data(text.utf8) }

    private static func checkBytes(
        _ store: any WLStorageStore, other: any WLStorageStore, unlisted: Set<String>, sourceLocation: SourceLocation
    ) throws {
        #expect(
            try store.read(key: "absent") == nil, "nothing is read where nothing was written",
            sourceLocation: sourceLocation)
        #expect(try store.keys().isEmpty, "a store made for the check holds nothing", sourceLocation: sourceLocation)

        try store.write(key: "k", data: bytes("1"))
        #expect(try store.read(key: "k") == bytes("1"), sourceLocation: sourceLocation)
        #expect(
            try other.read(key: "k") == bytes("1"), "the other instance reads the write", sourceLocation: sourceLocation
        )
        try store.write(key: "k", data: bytes("\"two\""))
        #expect(
            try store.read(key: "k") == bytes("\"two\""), "a write replaces the bytes", sourceLocation: sourceLocation)

        #expect(
            try store.create(key: "k", data: bytes("3")) == false, "create leaves a stored key",
            sourceLocation: sourceLocation)
        #expect(try store.read(key: "k") == bytes("\"two\""), sourceLocation: sourceLocation)
        #expect(
            try store.create(key: "new", data: bytes("4")) == true, "create stores a missing key",
            sourceLocation: sourceLocation)
        #expect(try store.read(key: "new") == bytes("4"), sourceLocation: sourceLocation)

        #expect(try store.remove(key: "new", ifItHolds: bytes("5")) == false, sourceLocation: sourceLocation)
        #expect(
            try store.read(key: "new") == bytes("4"), "a conditional removal of other bytes keeps the key",
            sourceLocation: sourceLocation)
        #expect(try store.remove(key: "new", ifItHolds: bytes("4")) == true, sourceLocation: sourceLocation)
        #expect(try store.read(key: "new") == nil, sourceLocation: sourceLocation)
        try store.remove(key: "k")
        #expect(try store.read(key: "k") == nil, "a removed key reads as nothing", sourceLocation: sourceLocation)
        try store.remove(key: "k")  // Removing what is not there is no error.

        try store.write([
            WLStorageStoreWrite(key: "b1", data: bytes("1")), WLStorageStoreWrite(key: "b2", data: bytes("2")),
        ])
        #expect(try store.read(key: "b1") == bytes("1"), "a batch writes every key", sourceLocation: sourceLocation)
        #expect(try store.read(key: "b2") == bytes("2"), sourceLocation: sourceLocation)

        for (index, key) in unusualKeys.enumerated() {
            try store.write(key: key, data: bytes(String(index)))
        }
        for (index, key) in unusualKeys.enumerated() {
            #expect(
                try store.read(key: key) == bytes(String(index)), "the key \(key.debugDescription)",
                sourceLocation: sourceLocation)
        }
        let listed = Set(try store.keys())
        let written = Set(unusualKeys + ["b1", "b2"]).subtracting(unlisted)
        let difference =
            "missing \(written.subtracting(listed).sorted()), extra \(listed.subtracting(written).sorted())"
        #expect(
            listed == written, "keys() lists every stored key as written: \(difference)",
            sourceLocation: sourceLocation)
        for key in written.union(unlisted) { try store.remove(key: key) }
        #expect(try store.keys().isEmpty, sourceLocation: sourceLocation)
    }

    private static func checkConditionalWrites(
        _ store: any WLStorageConditionalStore, sourceLocation: SourceLocation
    ) throws {
        #expect(
            try store.write(key: "c", data: bytes("1"), ifItHolds: nil) == true, "stored where nothing is",
            sourceLocation: sourceLocation)
        #expect(
            try store.write(key: "c", data: bytes("2"), ifItHolds: nil) == false, "refused where something is",
            sourceLocation: sourceLocation)
        #expect(
            try store.write(key: "c", data: bytes("2"), ifItHolds: bytes("0")) == false, "refused over other bytes",
            sourceLocation: sourceLocation)
        #expect(try store.read(key: "c") == bytes("1"), sourceLocation: sourceLocation)
        #expect(
            try store.write(key: "c", data: bytes("2"), ifItHolds: bytes("1")) == true, sourceLocation: sourceLocation)
        #expect(try store.read(key: "c") == bytes("2"), sourceLocation: sourceLocation)
        try store.remove(key: "c")

        // A batch on condition: each write judged by its own key; over the 500 rows of a PostgreSQL statement too.
        try store.write(key: "cb-held", data: bytes("1"))
        try store.write(key: "cb-other", data: bytes("1"))
        try store.write(key: "cb-taken", data: bytes("1"))
        let many = (0..<520).map { String(format: "cb-%03d", $0) }
        let batch = ["cb-absent", "cb-held", "cb-missing", "cb-other", "cb-taken"] + many
        let expected: [Data?] = [nil, bytes("1"), bytes("1"), bytes("0"), nil] + many.map { _ in nil }
        let written = try store.write(
            batch.map { WLStorageStoreWrite(key: $0, data: bytes("2")) }, ifTheyHold: expected)
        #expect(
            written == [true, true, false, false, false] + many.map { _ in true },
            "a batch on condition stores the writes whose keys hold what is expected, and only those",
            sourceLocation: sourceLocation)
        for (key, value) in [("cb-absent", "2"), ("cb-held", "2"), ("cb-other", "1"), ("cb-taken", "1")] {
            #expect(try store.read(key: key) == bytes(value), "\(key)", sourceLocation: sourceLocation)
        }
        #expect(try store.read(key: "cb-missing") == nil, sourceLocation: sourceLocation)
        #expect(try store.read(key: many[519]) == bytes("2"), sourceLocation: sourceLocation)
        // The keys read in one call, in the order asked, over more than a statement's or a transaction's keys.
        let asked = ["cb-other", "cb-missing"] + many.reversed() + ["cb-absent"]
        #expect(
            try store.read(keys: asked) == [bytes("1"), nil] + many.map { _ in bytes("2") } + [bytes("2")],
            "the keys read in one call hold what each read of one holds", sourceLocation: sourceLocation)
        for key in batch { try store.remove(key: key) }
    }

    private static func checkVersionedWrites(_ store: any WLStorageVersionedStore, sourceLocation: SourceLocation)
        throws
    {
        func version(_ key: String) throws -> Int64? {
            switch try store.readVersioned(key: key) {
            case .found(_, let version): return version
            case .absent: return nil
            case .untagged(let error): throw error
            }
        }
        #expect(try version("v") == nil, sourceLocation: sourceLocation)
        let first = WLStorageWriteTag(text: "contract-first-\(UUID().uuidString)")
        let created = try store.write(key: "v", data: bytes("1"), ifVersion: nil, tag: first)
        #expect(isStored(created), "a tagged creation where nothing is", sourceLocation: sourceLocation)
        let v1 = try #require(try version("v"), sourceLocation: sourceLocation)
        let again = try store.write(key: "v", data: bytes("9"), ifVersion: nil, tag: WLStorageWriteTag(text: "x"))
        #expect(isRefused(again), "a tagged creation where something is", sourceLocation: sourceLocation)

        let second = WLStorageWriteTag(text: "contract-second-\(UUID().uuidString)")
        #expect(
            isStored(try store.write(key: "v", data: bytes("2"), ifVersion: v1, tag: second)),
            sourceLocation: sourceLocation)
        let v2 = try #require(try version("v"), sourceLocation: sourceLocation)
        #expect(v2 > v1, "a write gives the key a greater version", sourceLocation: sourceLocation)
        let stale = try store.write(key: "v", data: bytes("3"), ifVersion: v1, tag: WLStorageWriteTag(text: "y"))
        #expect(isRefused(stale), "refused on a version the key no longer has", sourceLocation: sourceLocation)
        #expect(try store.read(key: "v") == bytes("2"), sourceLocation: sourceLocation)

        let trace = try #require(try store.trace(of: second, key: "v"), sourceLocation: sourceLocation)
        #expect(trace.tagFound, "the key keeps the tag of its last write", sourceLocation: sourceLocation)
        #expect(trace.version == v2, sourceLocation: sourceLocation)
        let unknown = try #require(
            try store.trace(of: WLStorageWriteTag(text: "never-written"), key: "v"), sourceLocation: sourceLocation)
        #expect(!unknown.tagFound, "a tag never written is not found", sourceLocation: sourceLocation)
        #expect(unknown.tagsKept <= unknown.capacity, sourceLocation: sourceLocation)

        try store.write(key: "v", data: bytes("4"))
        #expect(
            try version("v").map { $0 > v2 } == true, "a plain write gives a greater version too",
            sourceLocation: sourceLocation)
        try store.remove(key: "v")
        #expect(
            try store.trace(of: second, key: "v") == nil, "nothing to trace where nothing is",
            sourceLocation: sourceLocation)
    }

    private static func isStored(_ result: WLStorageTaggedWriteResult) -> Bool {
        if case .stored = result { return true }
        return false
    }

    private static func isRefused(_ result: WLStorageTaggedWriteResult) -> Bool {
        if case .refused = result { return true }
        return false
    }

    private static func checkFeed(
        _ store: any WLStorageStore, writeElsewhere: (String, Data) throws -> Void, sourceLocation: SourceLocation
    ) throws {
        let reported = ReportedChanges()
        let subscription = try #require(
            store.observeChanges { change in reported.append(change) }, "the store offers a feed",
            sourceLocation: sourceLocation)
        defer { subscription.cancel() }
        // A feed may need a moment to start listening (a write before is not its to report): written again until
        // it reports the key.
        var heard = false
        for attempt in 0..<20 where !heard {
            try writeElsewhere("fed", bytes(String(attempt)))
            heard = eventually(timeout: 3) { reported.contains(.key("fed")) }
        }
        #expect(heard, "the feed reports another program's write", sourceLocation: sourceLocation)
        try store.remove(key: "fed")
    }
}

/// What a feed reported, under an `NSLock` (which ThreadSanitizer sees, as it does not `Mutex` on Linux).
private final class ReportedChanges: @unchecked Sendable {  // `changes` under `lock`
    private let lock = NSLock()
    private var changes: [WLStorageStoreChange] = []

    func append(_ change: WLStorageStoreChange) { lock.withLock { changes.append(change) } }
    func contains(_ change: WLStorageStoreChange) -> Bool { lock.withLock { changes.contains(change) } }
}
