// Attacks on the recent changes: the backing enum of WLStorage.init, the directory store's identity made once, the
// encrypted store's resolution over key prefixes, its conditional writes for update(), the rotation rewrite, bytes
// that do not open seen by a check (.unreadable), key files read with open/read, and AESGCM.open on pointers.
// Tests that fail expose a fault; the others cover hard cases that hold.
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// The UTF-8 bytes of `text`.
private func json(_ text: String) -> Data { Data(text.utf8) }

@Suite(.capturingOutput)
struct Attack4Tests {
    private let key = try! WLStorageEncryptionKey.random()

    private func store(_ directory: URL, key: WLStorageEncryptionKey? = nil, previous: [WLStorageEncryptionKey] = [])
        -> WLStorageEncryptedStore
    {
        WLStorageEncryptedStore(.directory(directory), key: key ?? self.key, previousKeys: previous)
    }

    private func file(_ name: String, in directory: URL) -> Data? {
        FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
    }

    /// Another program's write: a temporary file renamed over the file, as the library writes.
    private func writeFromOutside(_ data: Data, _ name: String, in directory: URL) throws {
        let temporary = directory.appendingPathComponent("outside-\(UUID().uuidString).tmp")
        try data.write(to: temporary)
        #expect(rename(temporary.path, directory.appendingPathComponent(name).path) == 0)
    }

    /// The fingerprint a sealed box carries (bytes 5..<9).
    private func fingerprint(of sealed: Data?) -> [UInt8]? {
        guard let sealed, sealed.count >= SealedBox.minimumLength else { return nil }
        return Array(sealed.dropFirst(5).prefix(4))
    }

    // MARK: update() over a conditional store

    /// "Empty bytes stand for nothing stored, as in any store": an update of a key that holds empty bytes in an
    /// encrypted store over a store that writes on condition must end (it does over the plain store).
    @Test func anUpdateOfAKeyHoldingEmptyBytesInAnEncryptedConditionalStoreEnds() throws {
        let memory = MemoryStore()
        let encrypted = memory.encrypted(with: key)
        try encrypted.write(key: "n", data: json("5"))
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: encrypted)
        #expect(storage.wrappedValue == 5)
        // Another replica empties the key (no feed event: the update reads the store itself).
        memory.contents.state.withLock { $0.values["n"] = Data() }
        let done = Atomic<Bool>(false)
        let thread = Thread {
            storage.update { $0 += 1 }
            done.store(true, ordering: .releasing)
        }
        thread.start()
        let ended = eventually(timeout: 5) { done.load(ordering: .acquiring) }
        #expect(ended, "update() still running after 5 s: it retries its conditional write forever")
        if !ended {
            // Unblock the spinning update: a sealed empty value compares equal to the empty bytes it expects.
            let emptySealed = try SealedBox.seal(Data(), key: key.bytes, associatedKey: "n")
            memory.contents.state.withLock { $0.values["n"] = emptySealed }
            #expect(eventually(timeout: 30) { done.load(ordering: .acquiring) })
        }
        #expect(storage.wrappedValue == 1)
    }

    /// The same over the plain memory store: the update ends, and stores 1.
    @Test func anUpdateOfAKeyHoldingEmptyBytesInAPlainConditionalStoreEnds() throws {
        let memory = MemoryStore()
        memory.contents.state.withLock { $0.values["n"] = json("5") }
        let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: memory)
        #expect(storage.wrappedValue == 5)
        memory.contents.state.withLock { $0.values["n"] = Data() }
        storage.update { $0 += 1 }
        #expect(storage.wrappedValue == 1)
        #expect(memory.stored("n") == "1")
    }

    /// A value sealed under a previous key, read by the storages of two replicas (two handles, two cells), updated
    /// from many threads of both: no increment is lost, and the result is sealed under the current key.
    @Test func concurrentUpdatesThroughTwoRotatedReplicasLoseNothing() throws {
        let memory = MemoryStore()
        let old = try WLStorageEncryptionKey.random()
        try memory.encrypted(with: old).write(key: "n", data: json("0"))
        let one = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil, store: memory.encrypted(with: key, previousKeys: [old]))
        let two = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil,
            store: MemoryStore(replicaOf: memory).encrypted(with: key, previousKeys: [old]))
        #expect(one.wrappedValue == 0)
        #expect(two.wrappedValue == 0)
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            for _ in 0..<100 { (index % 2 == 0 ? one : two).update { $0 += 1 } }
        }
        let sealed = memory.contents.state.withLock { $0.values["n"] }
        #expect(fingerprint(of: sealed) == key.fingerprint)
        let opened = try memory.encrypted(with: key).read(key: "n")
        #expect(opened == json("400"))
    }

    /// A replica that read a value sealed under a previous key keeps its rewrite pending (no flush interval). Another
    /// replica then updates the key (its write is stored on condition; this replica's feed has not told it yet, as
    /// a notification may come late). The pending rewrite must not put the pre-rotation value back over the update:
    /// the store writes on condition, so the rewrite can be made on the condition that the key still holds what was
    /// read.
    @Test func aPendingRotationRewriteDoesNotReplaceAnotherReplicasUpdate() throws {
        let memory = MemoryStore()
        let old = try WLStorageEncryptionKey.random()
        try memory.encrypted(with: old).write(key: "n", data: json("10"))
        let late = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil, store: memory.encrypted(with: key, previousKeys: [old]))
        #expect(late.wrappedValue == 10)
        #expect(late.hasPendingChanges)  // the rewrite
        let other = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil,
            store: MemoryStore(replicaOf: memory).encrypted(with: key, previousKeys: [old]))
        other.update { $0 = 99 }
        #expect(try memory.encrypted(with: key).read(key: "n") == json("99"))
        late.flush()
        let now = try memory.encrypted(with: key).read(key: "n")
        #expect(
            now == json("99"),
            "the rewrite replaced another replica's update with \(String(decoding: now ?? Data(), as: UTF8.self))")
    }

    /// A throwing closure, a key removed behind the storage (expected nil), and a prefixed conditional base: updates
    /// from two replicas through `memory.prefixed("a.").encrypted(...)` lose nothing, and a throw stores nothing.
    @Test func updatesOfAPrefixedConditionalBaseHoldWithThrowsAndMissingValues() throws {
        struct Refused: Error {}
        let memory = MemoryStore()
        let one = WLStorage(
            key: "n", defaultValue: 0, flushInterval: nil, store: memory.prefixed("a.").encrypted(with: key))
        let two = WLStorage(
            key: "a.n", defaultValue: 0, flushInterval: nil,
            store: MemoryStore(replicaOf: memory).encrypted(with: key))
        one.flush()
        two.flush()
        memory.contents.state.withLock { $0.values["a.n"] = nil }  // removed behind both
        one.update { $0 += 1 }
        #expect(try memory.encrypted(with: key).read(key: "a.n") == json("1"))
        #expect(throws: Refused.self) { try two.update { _ in throw Refused() } }
        #expect(try memory.encrypted(with: key).read(key: "a.n") == json("1"))
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            for _ in 0..<50 { (index % 2 == 0 ? one : two).update { $0 += 1 } }
        }
        #expect(try memory.encrypted(with: key).read(key: "a.n") == json("201"))
        #expect(memory.contents.state.withLock { $0.values["n"] } == nil)
    }

    /// Two encrypted stores of one directory with the same current key share one identity, so storages of one key
    /// share one cell. The second storage is given the previous key of the stored value: it must read it (its store
    /// opens it), whichever storage came first.
    @Test func aStorageGivenAPreviousKeyReadsItsValueAlthoughAStorageWithoutItCameFirst() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""v""#))
            let rotated = store(directory, previous: [old])
            #expect(try rotated.read(key: "token") == json(#""v""#))
            let first = WLStorage(key: "token", defaultValue: "none", flushInterval: nil, store: store(directory))
            #expect(first.lastError?.code == .decodingFailed)
            let second = WLStorage(key: "token", defaultValue: "none", flushInterval: nil, store: rotated)
            #expect(
                second.wrappedValue == "v", "second holds \(second.wrappedValue): its store's previous key is not used")
        }
    }

    // MARK: Bytes that do not open, seen by a check

    /// A value read at creation, then bytes under a key this program lacks, then the file removed by the other
    /// program. A removal is respected (CellState.applyChange: "a removal is respected, not undone by saving the
    /// default again"): the storage holds its default, and nothing is written. It must not bring back the value it had
    /// before the unreadable bytes.
    @Test(arguments: [false, true])
    func aRemovalAfterUnreadableBytesDoesNotBringBackTheOldValue(setLocally: Bool) throws {
        try withTemporaryDirectory { directory in
            let other = try WLStorageEncryptionKey.random()
            if !setLocally { try store(directory).write(key: "token", data: json(#""first""#)) }
            let storage = WLStorage(key: "token", defaultValue: "none", flushInterval: 0, store: store(directory))
            if setLocally {
                storage.wrappedValue = "first"
                storage.flush()
            }
            #expect(storage.wrappedValue == "first")
            let sealed = try SealedBox.seal(json(#""other""#), key: other.bytes, associatedKey: "token")
            try writeFromOutside(sealed, "token", in: directory)
            #expect(eventually { storage.lastError?.code == .decodingFailed })
            // The other program removes the value.
            unlink(directory.appendingPathComponent("token").path)
            #expect(eventually { storage.lastError == nil })
            storage.flush()
            #expect(storage.wrappedValue == "none")
            let left = file("token", in: directory)
            #expect(left == nil, "the file was written again: \(left.map { _ in "present" } ?? "")")
        }
    }

    /// A rotated storage's rewrite is pending (no flush interval) when another program stores bytes this one cannot
    /// open, then removes them. The rewrite is not a change of this program: it gives way to the removal, as it does
    /// to a removal seen without the unreadable bytes.
    @Test func aPendingRewriteGivesWayToARemovalAfterUnreadableBytes() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            let other = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""first""#))
            let storage = WLStorage(
                key: "token", defaultValue: "none", flushInterval: nil, store: store(directory, previous: [old]))
            #expect(storage.wrappedValue == "first")
            #expect(storage.hasPendingChanges)
            let sealed = try SealedBox.seal(json(#""other""#), key: other.bytes, associatedKey: "token")
            try writeFromOutside(sealed, "token", in: directory)
            #expect(eventually { storage.lastError?.code == .decodingFailed })
            unlink(directory.appendingPathComponent("token").path)
            #expect(eventually { storage.lastError?.code != .decodingFailed })
            storage.flush()
            let left = file("token", in: directory)
            #expect(left == nil, "the pre-rotation value was written again after the other program removed it")
            #expect(storage.wrappedValue == "none")
        }
    }

    /// The same pending rewrite, then unreadable bytes, then a readable value stored by the other program: the storage
    /// adopts it, and no error is left: no change of this program was discarded (the rewrite is none).
    @Test func aPendingRewriteIsNoDiscardedChangeWhenAReadableValueComesBack() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            let other = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""first""#))
            let storage = WLStorage(
                key: "token", defaultValue: "none", flushInterval: nil, store: store(directory, previous: [old]))
            #expect(storage.hasPendingChanges)
            let unreadable = try SealedBox.seal(json(#""other""#), key: other.bytes, associatedKey: "token")
            try writeFromOutside(unreadable, "token", in: directory)
            #expect(eventually { storage.lastError?.code == .decodingFailed })
            let readable = try SealedBox.seal(json(#""second""#), key: key.bytes, associatedKey: "token")
            try writeFromOutside(readable, "token", in: directory)
            #expect(eventually { storage.wrappedValue == "second" })
            #expect(eventually { storage.lastError?.code != .decodingFailed })
            #expect(storage.lastError == nil, "lastError: \(String(describing: storage.lastError?.code))")
            #expect(!storage.hasPendingChanges)
        }
    }

    /// Unreadable bytes, no change pending, then a readable value: adopted, and lastError cleared.
    @Test func aStorageRecoversWhenAReadableValueIsStoredAfterUnreadableBytes() throws {
        try withTemporaryDirectory { directory in
            let other = try WLStorageEncryptionKey.random()
            try store(directory).write(key: "token", data: json(#""first""#))
            let storage = WLStorage(key: "token", defaultValue: "none", flushInterval: 0, store: store(directory))
            let unreadable = try SealedBox.seal(json(#""other""#), key: other.bytes, associatedKey: "token")
            try writeFromOutside(unreadable, "token", in: directory)
            #expect(eventually { storage.lastError?.code == .decodingFailed })
            // A set meanwhile waits, and flush() returns without writing it.
            storage.wrappedValue = "local"
            storage.flush()
            #expect(file("token", in: directory) == unreadable)
            let readable = try SealedBox.seal(json(#""second""#), key: key.bytes, associatedKey: "token")
            try writeFromOutside(readable, "token", in: directory)
            #expect(eventually { storage.wrappedValue == "second" })
            // The set is discarded, as documented, and said so; after another set, all is well.
            storage.wrappedValue = "third"
            storage.flush()
            #expect(storage.lastError == nil)
            #expect(try store(directory).read(key: "token") == json(#""third""#))
        }
    }

    /// Unreadable bytes with a set pending, then the file removed: the set is written.
    @Test func aPendingSetIsWrittenWhenUnreadableBytesAreRemoved() throws {
        try withTemporaryDirectory { directory in
            let other = try WLStorageEncryptionKey.random()
            let storage = WLStorage(key: "token", defaultValue: "none", flushInterval: nil, store: store(directory))
            storage.wrappedValue = "first"
            storage.flush()
            let unreadable = try SealedBox.seal(json(#""other""#), key: other.bytes, associatedKey: "token")
            try writeFromOutside(unreadable, "token", in: directory)
            #expect(eventually { storage.lastError?.code == .decodingFailed })
            storage.wrappedValue = "pending"
            storage.flush()
            #expect(storage.hasPendingChanges)
            unlink(directory.appendingPathComponent("token").path)
            #expect(eventually { storage.lastError == nil })
            storage.flush()
            #expect(try store(directory).read(key: "token") == json(#""pending""#))
        }
    }

    // MARK: Sizes through prefixes and nesting

    /// A value just under the maximum size, stored by a storage of a prefixed encrypted store, must read back through
    /// that very store's `read(key:)` (its file is 37 bytes longer than the value).
    @Test func aValueJustUnderTheMaximumSizeReadsBackThroughAPrefixedEncryptedStore() throws {
        try withTemporaryDirectory { directory in
            let limit = WLStorage<Never>.maximumValueSize
            let big = String(repeating: "s", count: limit - 12)
            let prefixed = WLStorageDirectoryStore.directory(directory).prefixed("a.").encrypted(with: key)
            do {
                let storage = WLStorage(key: "big", defaultValue: "", flushInterval: nil, store: prefixed)
                storage.wrappedValue = big
                storage.flush()
                #expect(!storage.hasPendingChanges)
            }
            #expect(file("a.big", in: directory)?.count == limit - 10 + 37)
            var readBack: Data?
            var failure: (any Error)?
            do { readBack = try prefixed.read(key: "big") } catch { failure = error }
            #expect(failure == nil, "\(String(describing: failure))")
            #expect(readBack?.count == limit - 10)
        }
    }

    /// The same through an encrypted store over an encrypted store: a value within the limit is stored and read back.
    @Test func aValueJustUnderTheMaximumSizeRoundTripsThroughNestedEncryption() throws {
        try withTemporaryDirectory { directory in
            let limit = WLStorage<Never>.maximumValueSize
            let big = String(repeating: "s", count: limit - 12)
            let inner = try WLStorageEncryptionKey.random()
            let nested = WLStorageDirectoryStore.directory(directory).encrypted(with: inner).encrypted(with: key)
            do {
                let storage = WLStorage(key: "big", defaultValue: "", flushInterval: nil, store: nested)
                storage.wrappedValue = big
                storage.flush()
                #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
            }
            let again = WLStorage(key: "big", defaultValue: "", flushInterval: nil, store: nested)
            #expect(again.lastError == nil, "\(String(describing: again.lastError))")
            #expect(again.wrappedValue.count == big.count)
        }
    }

    // MARK: Nesting and wrappings

    /// The same file through different wrappings under one key: a prefixed store under encryption, an encrypted store
    /// under a prefix, and the plain key: one value, one cell; another prefix or another key: never.
    @Test func wrappingsOfOneKeyShareOneValueAndOthersDoNot() throws {
        try withTemporaryDirectory { directory in
            let dir = WLStorageDirectoryStore.directory(directory)
            let a = WLStorage(
                key: "x", defaultValue: "", flushInterval: nil, store: dir.prefixed("p.").encrypted(with: key))
            let b = WLStorage(
                key: "x", defaultValue: "", flushInterval: nil, store: dir.encrypted(with: key).prefixed("p."))
            let c = WLStorage(key: "p.x", defaultValue: "", flushInterval: nil, store: dir.encrypted(with: key))
            let d = WLStorage(
                key: "x", defaultValue: "", flushInterval: nil,
                store: dir.prefixed("p").prefixed(".").encrypted(with: key))
            let e = WLStorage(
                key: "x", defaultValue: "", flushInterval: nil, store: dir.prefixed("q.").encrypted(with: key))
            let other = try WLStorageEncryptionKey.random()
            let f = WLStorage(
                key: "x", defaultValue: "", flushInterval: nil, store: dir.prefixed("p.").encrypted(with: other))
            a.wrappedValue = "shared"
            #expect(b.wrappedValue == "shared")
            #expect(c.wrappedValue == "shared")
            #expect(d.wrappedValue == "shared")
            #expect(e.wrappedValue == "")
            #expect(f.wrappedValue == "")
            a.flush()
            #expect(try dir.encrypted(with: key).read(key: "p.x") == json(#""shared""#))
            #expect(try dir.prefixed("p.").encrypted(with: key).read(key: "x") == json(#""shared""#))
            #expect(try dir.encrypted(with: key).prefixed("p.").read(key: "x") == json(#""shared""#))
            #expect(throws: WLStorageError.self) { try dir.prefixed("p.").encrypted(with: other).read(key: "x") }
        }
    }

    /// Encryption over encryption with a rotated inner store: a value sealed inside with the inner store's previous
    /// key is written again under its current key once a storage reads it ("A value opened with one of them is
    /// written again under the current key as soon as it is read").
    @Test func aNestedRotatedStoreRewritesAValueOfItsPreviousKey() throws {
        try withTemporaryDirectory { directory in
            let innerOld = try WLStorageEncryptionKey.random()
            let innerNew = try WLStorageEncryptionKey.random()
            let dir = WLStorageDirectoryStore.directory(directory)
            try dir.encrypted(with: innerOld).encrypted(with: key).write(key: "token", data: json(#""v""#))
            #expect(fingerprint(of: file("token", in: directory)) == innerOld.fingerprint)
            do {
                let storage = WLStorage(
                    key: "token", defaultValue: "", flushInterval: nil,
                    store: dir.encrypted(with: innerNew, previousKeys: [innerOld]).encrypted(with: key))
                #expect(storage.wrappedValue == "v")
                storage.flush()
            }
            #expect(fingerprint(of: file("token", in: directory)) == innerNew.fingerprint)
        }
    }

    /// A rotated storage released right after its creation writes the rewrite (its deinit flushes).
    @Test func aRotatedStorageReleasedAtOnceStillReseals() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""v""#))
            _ = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: store(directory, previous: [old]))
            #expect(eventually { fingerprint(of: file("token", in: directory)) == key.fingerprint })
            #expect(try store(directory).read(key: "token") == json(#""v""#))
        }
    }

    /// A rotated value in an earlier type's shape: the migration and the rewrite happen together; the result is
    /// sealed under the current key and in the current shape, and the kept copy is sealed too.
    @Test func aRotatedValueInAnEarlierShapeIsMigratedAndResealed() throws {
        struct Before: Codable { var user: String }
        struct After: Codable, Equatable { var login: String }
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "account", data: json(#"{"user":"ann"}"#))
            do {
                let storage = WLStorage(
                    key: "account", defaultValue: After(login: ""), flushInterval: nil,
                    store: store(directory, previous: [old]),
                    migrations: [.from(Before.self) { After(login: $0.user) }])
                #expect(storage.wrappedValue == After(login: "ann"))
                storage.flush()
            }
            #expect(fingerprint(of: file("account", in: directory)) == key.fingerprint)
            // In the current shape, with the earlier version's field kept for the programs that still read it.
            #expect(try store(directory).read(key: "account") == json(#"{"login":"ann","user":"ann"}"#))
        }
    }

    // MARK: Backers

    /// A user's backer that wraps the default backer of a file: a storage of it and a file-backed storage of the same
    /// file live in one process. A change written by the one must reach the other, as another program's would.
    @Test func aChangeWrittenThroughAWrappingBackerReachesTheFileBackedStorageOfTheSameFile() throws {
        final class Wrapping: WLStorageBacker, Sendable {
            let inner: WLStorageDefaultBacker<Int>
            var key: String { inner.key }
            init(_ inner: WLStorageDefaultBacker<Int>) { self.inner = inner }
            func read(defaultValueClosure: () -> Int) throws -> Int {
                try inner.read(defaultValueClosure: defaultValueClosure)
            }
            func write(value: Int) throws { try inner.write(value: value) }
        }
        try withTemporaryDirectory { directory in
            let plain = WLStorage(key: "n", defaultValue: 1, flushInterval: nil, store: .directory(directory))
            plain.flush()
            let wrapped = WLStorage(
                defaultValueClosure: { 2 }, flushInterval: nil,
                backer: Wrapping(WLStorageDefaultBacker<Int>(key: "n", directory: directory)))
            #expect(wrapped.wrappedValue == 1)
            wrapped.wrappedValue = 7
            wrapped.flush()
            #expect(stored(Int.self, key: "n", in: directory) == 7)
            #expect(eventually(timeout: 5) { plain.wrappedValue == 7 }, "plain still holds \(plain.wrappedValue)")
        }
    }

    /// Every public initializer of one file shares one cell: the key and store ones, the backer one with the default
    /// backer, through an empty prefix.
    @Test func everyInitializerOfOneFileSharesOneValue() throws {
        try withTemporaryDirectory { directory in
            let a = WLStorage(key: "k", defaultValue: 1, flushInterval: nil, store: .directory(directory))
            let b = WLStorage(
                defaultValueClosure: { 2 }, flushInterval: nil,
                backer: WLStorageDefaultBacker<Int>(key: "k", directory: directory))
            let c = WLStorage(
                key: "k", defaultValueClosure: { 3 }, flushInterval: nil,
                store: WLStorageDirectoryStore.directory(directory).prefixed(""))
            let d = WLStorage(
                key: "k", defaultValue: 4, flushInterval: nil,
                store: WLStorageDirectoryStore(url: directory.appendingPathComponent("sub/..")))
            #expect([a, b, c, d].allSatisfy { $0.wrappedValue == 1 })
            b.wrappedValue = 9
            #expect([a, b, c, d].allSatisfy { $0.wrappedValue == 9 })
        }
    }

    /// An observable custom backer: the backing enum's `.other` case keeps its feed.
    @Test func anObservableCustomBackerStillFollowsItsFeed() throws {
        let backer = ObservableMemoryBacker(stored: 3)
        let storage = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: backer)
        #expect(storage.wrappedValue == 3)
        backer.setFromOutside(8)
        #expect(eventually { storage.wrappedValue == 8 })
        storage.wrappedValue = 5
        storage.flush()
        #expect(backer.stored == 5)
    }

    // MARK: Directory identity

    /// Two encrypted stores of one directory, one through a symlink, one with `..`: storages of one key follow each
    /// other's writes.
    @Test func encryptedStoragesOfOneDirectorySpelledDifferentlyFollowEachOther() throws {
        try withTemporaryDirectory { root in
            let real = root.appendingPathComponent("real")
            try FileManager.default.createDirectory(at: real, withIntermediateDirectories: true)
            let link = root.appendingPathComponent("link")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real)
            let one = WLStorage(key: "t", defaultValue: "", flushInterval: nil, store: store(real))
            let two = WLStorage(key: "t", defaultValue: "", flushInterval: nil, store: store(link))
            let three = WLStorage(
                key: "t", defaultValue: "", flushInterval: nil, store: store(real.appendingPathComponent("../real")))
            one.wrappedValue = "a"
            one.flush()
            #expect(eventually { two.wrappedValue == "a" && three.wrappedValue == "a" })
            two.wrappedValue = "b"
            two.flush()
            #expect(eventually { one.wrappedValue == "b" && three.wrappedValue == "b" })
        }
    }

    /// An encrypted storage's directory replaced (renamed away, made anew) after its store was created: a value
    /// another program stores in the new directory reaches the storage.
    @Test func anEncryptedStorageFollowsItsDirectoryReplacedAfterTheStoreWasMade() throws {
        try withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("d")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let storage = WLStorage(key: "t", defaultValue: "", flushInterval: nil, store: store(directory))
            storage.wrappedValue = "a"
            storage.flush()
            #expect(rename(directory.path, root.appendingPathComponent("old").path) == 0)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let sealed = try SealedBox.seal(json(#""b""#), key: key.bytes, associatedKey: "t")
            try writeFromOutside(sealed, "t", in: directory)
            #expect(eventually(timeout: 20) { storage.wrappedValue == "b" }, "holds \(storage.wrappedValue)")
        }
    }

    // MARK: Key files

    /// A FIFO, /dev/zero, a symlink to /dev/zero and a huge file are refused at once, with a reason.
    @Test func keyFilesThatAreNotSmallRegularFilesAreRefusedAtOnce() throws {
        try withTemporaryDirectory { directory in
            let fifo = directory.appendingPathComponent("fifo.key")
            #expect(mkfifo(fifo.path, 0o600) == 0)
            let link = directory.appendingPathComponent("zero.key")
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "/dev/zero")
            let huge = directory.appendingPathComponent("huge.key")
            #expect(
                FileManager.default.createFile(atPath: huge.path, contents: nil, attributes: [.posixPermissions: 0o600])
            )
            #expect(truncate(huge.path, 1 << 40) == 0)  // sparse: a terabyte that takes no disk
            for url in [fifo, URL(fileURLWithPath: "/dev/zero"), link, huge] {
                let start = ContinuousClock.now
                #expect(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
                #expect(ContinuousClock.now - start < .seconds(5))
            }
            // 32 raw bytes and the base64 text with CRLF both load.
            let raw = directory.appendingPathComponent("raw.key")
            try Data(key.bytes).write(to: raw)
            chmod(raw.path, 0o600)
            #expect(try WLStorageEncryptionKey(contentsOf: raw).bytes == key.bytes)
            let text = directory.appendingPathComponent("text.key")
            try Data(("\r\n " + key.base64EncodedSecret + "\r\n").utf8).write(to: text)
            chmod(text.path, 0o600)
            #expect(try WLStorageEncryptionKey(contentsOf: text).bytes == key.bytes)
        }
    }

    /// A key file that holds a key, 70,000 spaces, then text that is no key: the file does not hold "32 bytes, or
    /// their base64 text (surrounding white space is ignored)", so it must be refused. The reader stops after 64 KiB
    /// and takes what it read.
    @Test func aKeyFileWithTextPastItsFirst64KiBIsNoKey() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("storage.key")
            let text = key.base64EncodedSecret + String(repeating: " ", count: 70_000) + "this is not a key"
            try Data(text.utf8).write(to: url)
            chmod(url.path, 0o600)
            var loaded: WLStorageEncryptionKey?
            #expect(throws: WLStorageError.self) { loaded = try WLStorageEncryptionKey(contentsOf: url) }
            #expect(loaded == nil, "loaded \(String(describing: loaded)) from a file that is not a key")
        }
    }

    // MARK: AESGCM on pointers

    /// Boxes in Data slices that do not start at 0, empty plaintexts (37-byte boxes), 36 bytes, and a large value.
    @Test func sealedBoxesOpenFromSlicesAndAtTheirEdges() throws {
        // An empty plaintext: a box of exactly 37 bytes that opens to nothing.
        let empty = try SealedBox.seal(Data(), key: key.bytes, associatedKey: "k")
        #expect(empty.count == 37)
        #expect(try SealedBox.open(empty, keys: [key.bytes], associatedKey: "k").plaintext == Data())
        #expect(throws: CipherError.self) { try SealedBox.open(empty, keys: [key.bytes], associatedKey: "kk") }
        // 36 bytes: not a box.
        #expect(throws: CipherError.self) {
            try SealedBox.open(empty.prefix(36), keys: [key.bytes], associatedKey: "k")
        }
        // In a slice that starts past 0, and in one of a larger buffer that ends past the box.
        var padded = Data(repeating: 0xAA, count: 7)
        padded.append(empty)
        padded.append(Data(repeating: 0xBB, count: 5))
        let slice = padded[7..<(7 + 37)]
        #expect(slice.startIndex == 7)
        #expect(try SealedBox.open(slice, keys: [key.bytes], associatedKey: "k").plaintext == Data())
        // A large value, sliced.
        let large = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let sealed = try SealedBox.seal(large, key: key.bytes, associatedKey: "")
        var framed = Data([1, 2, 3])
        framed.append(sealed)
        let opened = try SealedBox.open(framed.dropFirst(3), keys: [key.bytes], associatedKey: "")
        #expect(opened.plaintext == large)
        #expect(opened.plaintext.startIndex == 0)
        // One flipped bit anywhere in a slice fails.
        for index in [0, 4, 5, 9, 21, 36] {
            var bad = Data(slice)
            bad[index] ^= 1
            #expect(throws: CipherError.self) { try SealedBox.open(bad, keys: [key.bytes], associatedKey: "k") }
        }
        // The Data-based open with slices of a buffer for each part.
        let nonce = try AESGCM.randomNonce()
        let parts = try AESGCM.seal(Data("hello".utf8), key: key.bytes, nonce: nonce, additionalData: Data("ad".utf8))
        var buffer = Data([9, 9])
        buffer.append(parts.ciphertext)
        buffer.append(parts.tag)
        buffer.append(Data("xad".utf8))
        let ciphertext = buffer[2..<7]
        let tag = buffer[7..<23]
        let additional = buffer[24..<26]
        #expect(
            try AESGCM.open(ciphertext: ciphertext, tag: tag, key: key.bytes, nonce: nonce, additionalData: additional)
                == Data("hello".utf8))
        #expect(throws: CipherError.self) {
            try AESGCM.open(
                ciphertext: ciphertext, tag: tag.prefix(15), key: key.bytes, nonce: nonce, additionalData: additional)
        }
        #expect(throws: CipherError.self) {
            try AESGCM.open(
                ciphertext: ciphertext, tag: tag, key: Array(key.bytes.prefix(16)), nonce: nonce,
                additionalData: additional)
        }
    }
}
