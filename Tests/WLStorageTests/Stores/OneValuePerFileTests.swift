// One file, one value: every way of opening a file (initializers, wrapping backers and stores) shares one cell.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput)
struct OneValuePerFileTests: EncryptedDirectorySuite {
    let key = try! WLStorageEncryptionKey.random()

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
            #expect(eventually(timeout: 30) { plain.wrappedValue == 7 }, "plain still holds \(plain.wrappedValue)")
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

    /// A burst of writes through the directory store's own API: a file storage of the same file in the process ends
    /// on the last one.
    @Test func aBurstOfDirectoryStoreWritesEndsOnTheLastValue() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(storage.wrappedValue == 0)
            let directoryStore = WLStorageDirectoryStore.directory(directory)
            for value in 1...300 { try directoryStore.write(key: "k", data: json("\(value)")) }
            #expect(eventually(timeout: 30) { storage.wrappedValue == 300 })
            // A set after it wins, and is not reverted by any late event.
            storage.wrappedValue = 301
            storage.flush()
            usleep(200_000)
            #expect(storage.wrappedValue == 301)
            #expect(try directoryStore.read(key: "k") == json("301"))
        }
    }

    /// A backer the program holds and writes through is seen by the storage of its file (the fix). A backer that was
    /// once handed to a storage which joined an existing cell (so it never kept that cell's value) is still the
    /// program's own: its writes must be seen too. `attach()` marks it as a storage's for good, before the storage
    /// even knows whether it will use it (WLStorage.swift, `case .file: file.attach()` before the registry lookup).
    @Test func aBackerHandedToAStorageThatJoinedAnotherCellStillWritesAsAnotherProgram() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(storage.wrappedValue == 0)
            let free = WLStorageDefaultBacker<Int>(key: "k", directory: directory)
            try free.write(value: 6)
            #expect(eventually { storage.wrappedValue == 6 })
            let held = WLStorageDefaultBacker<Int>(key: "k", directory: directory)
            do {
                let joined = WLStorage(defaultValueClosure: { 0 }, flushInterval: nil, backer: held)
                #expect(joined.cell === storage.cell)  // it joined: `held` is not the cell's backer
            }
            try held.write(value: 7)
            #expect(
                eventually(timeout: 30) { storage.wrappedValue == 7 },
                "the storage holds \(storage.wrappedValue) while its file holds 7")
        }
    }

    /// A storage of a directory store wrapped in a store of the program's own (so a store's backer, whose writes are
    /// not announced) and a file storage of the same file: each follows the other's writes, and a set made just after
    /// a write is not reverted by the news of that write.
    @Test func aWrappedDirectoryStoreAndAFileStorageFollowEachOther() throws {
        try withTemporaryDirectory { directory in
            let wrapped = WLStorage(
                key: "k", defaultValue: 0, flushInterval: nil, store: PassThroughStore(base: .directory(directory)))
            let file = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            // What each side holds, and the file, for the message of a wait that runs out.
            func holdings() -> String {
                let bytes = FileManager.default.contents(atPath: directory.appendingPathComponent("k").path)
                return "file storage \(file.wrappedValue), wrapped storage \(wrapped.wrappedValue), file holds "
                    + String(decoding: bytes ?? Data(), as: UTF8.self)
            }
            for round in 1...20 {
                wrapped.wrappedValue = round * 10
                wrapped.flush()
                wrapped.wrappedValue = round * 10 + 1  // set just after the write, kept pending
                // Kept pending unless a `WLStorageSystem.flushAll()` of a test running beside (a fault or an encryption
                // test) writes it first: the file storage may then take it without ever holding the
                // value before, which it can only see while that value is in the file.
                let followed = eventually {
                    file.wrappedValue == round * 10
                        || (file.wrappedValue == round * 10 + 1 && !wrapped.hasPendingChanges)
                }
                #expect(followed, "round \(round): \(holdings())")
                #expect(wrapped.wrappedValue == round * 10 + 1)
                wrapped.flush()
                #expect(eventually { file.wrappedValue == round * 10 + 1 }, "round \(round): \(holdings())")
                file.wrappedValue = round * 10 + 2
                file.flush()
                #expect(eventually { wrapped.wrappedValue == round * 10 + 2 }, "round \(round): \(holdings())")
            }
        }
    }
}
