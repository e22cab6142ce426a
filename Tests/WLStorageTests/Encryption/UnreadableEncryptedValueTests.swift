// Bytes that do not open under the keys at hand are reported and never overwritten; once readable or removed, the
// storage goes on.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageCrypto

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput)
struct UnreadableEncryptedValueTests: EncryptedDirectorySuite {
    let key = try! WLStorageEncryptionKey.random()

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

    /// "A job that may adopt a value ends the chain, so that observers are told with the cell idle: an observer may
    /// read, set or flush this very storage" (StorageCell.complete). After unreadable bytes, a reread that finds
    /// nothing now changes the value (to the default); with a check asked for while that reread ran, the cell stays
    /// busy on the thread that tells the observers, and an observer's flush() is refused as reentrant.
    @Test func anObserverToldOfARemovalAfterUnreadableBytesMayFlushTheStorage() throws {
        let memory = MemoryStore()
        let holding = PassThroughStore(base: memory)
        let encrypted = holding.encrypted(with: key)
        try encrypted.write(key: "token", data: json(#""first""#))
        let storage = WLStorage(key: "token", defaultValue: "none", flushInterval: nil, store: encrypted)
        #expect(storage.wrappedValue == "first")
        let other = try WLStorageEncryptionKey.random()
        let unreadable = try SealedBox.seal(json(#""other""#), key: other.bytes, associatedKey: "token")
        memory.contents.state.withLock { $0.values["token"] = unreadable }
        storage.cell.checkForExternalChange()
        #expect(storage.lastError?.code == .decodingFailed)

        // The other program removes the value; the reread that finds it gone is held while a check is asked for.
        memory.contents.state.withLock { $0.values["token"] = nil }
        let flushResults = Mutex<[String]>([])
        withObservationTracking {
            _ = storage.wrappedValue
        } onChange: {
            let result = storage.cell.flush()
            flushResults.withLock { $0.append("\(result)") }
        }
        let held = holding.holdNextRead()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            storage.cell.checkForExternalChange()
            done.signal()
        }
        thread.start()
        #expect(held.entered.wait(timeout: .now() + 60) == .success)
        storage.cell.checkForExternalChange()  // the cell is busy: the check is asked for
        held.open.signal()
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(eventually { storage.wrappedValue == "none" })
        #expect(
            flushResults.withLock { $0 } == ["done"],
            "the observer's flush: \(flushResults.withLock { $0 }) (the cell was busy on the observer's thread)")
    }

    /// Readable, unreadable, readable again, unreadable again, removed: the observers see each value read once, then
    /// the default; nothing is written, and no error is left.
    @Test func unreadableReadableUnreadableThenRemovedTellsObserversInOrder() throws {
        let memory = MemoryStore()
        let encrypted = memory.encrypted(with: key)
        try encrypted.write(key: "token", data: json(#""first""#))
        let storage = WLStorage(key: "token", defaultValue: "none", flushInterval: 0, store: encrypted)
        #expect(storage.wrappedValue == "first")
        let seen = Mutex<[String]>([])
        let subscription = storage.onChange(queue: DispatchQueue(label: "test.unreadable")) { value in
            seen.withLock { $0.append(value) }
        }
        let other = try WLStorageEncryptionKey.random()
        func unreadable(_ text: String) throws -> Data {
            try SealedBox.seal(json(text), key: other.bytes, associatedKey: "token")
        }
        memory.contents.state.withLock { $0.values["token"] = try! unreadable(#""x""#) }
        memory.report(.key("token"))
        #expect(eventually { storage.lastError?.code == .decodingFailed })
        try memory.encrypted(with: key).write(key: "token", data: json(#""second""#))
        memory.report(.key("token"))
        #expect(eventually { storage.wrappedValue == "second" })
        #expect(storage.lastError == nil)
        memory.contents.state.withLock { $0.values["token"] = try! unreadable(#""y""#) }
        memory.report(.key("token"))
        #expect(eventually { storage.lastError?.code == .decodingFailed })
        // Unreadable bytes of another kind meanwhile: still unknown, nothing adopted.
        memory.contents.state.withLock { $0.values["token"] = try! unreadable(#""z""#) }
        memory.report(.key("token"))
        memory.contents.state.withLock { $0.values["token"] = nil }
        memory.report(.key("token"))
        #expect(eventually { storage.wrappedValue == "none" })
        #expect(eventually { storage.lastError == nil })
        storage.flush()
        #expect(memory.contents.state.withLock { $0.values["token"] } == nil, "the default was saved after a removal")
        #expect(eventually { seen.withLock { $0 } == ["second", "none"] })
        #expect(seen.withLock { $0 } == ["second", "none"])
        subscription.cancel()
    }

    /// Unreadable bytes, a set made meanwhile, the storage released (its cell kept to write the set), then the bytes
    /// removed: the orphan cell writes the set.
    @Test func anOrphanCellWritesItsSetOnceUnreadableBytesAreRemoved() throws {
        let memory = MemoryStore()
        let encrypted = memory.encrypted(with: key)
        try encrypted.write(key: "token", data: json(#""first""#))
        let other = try WLStorageEncryptionKey.random()
        do {
            let storage = WLStorage(key: "token", defaultValue: "none", flushInterval: 0, store: encrypted)
            #expect(storage.wrappedValue == "first")
            memory.contents.state.withLock {
                $0.values["token"] = try! SealedBox.seal(json(#""x""#), key: other.bytes, associatedKey: "token")
            }
            memory.report(.key("token"))
            #expect(eventually { storage.lastError?.code == .decodingFailed })
            storage.wrappedValue = "pending"
        }
        memory.removeFromOutside("token")
        #expect(eventually(timeout: 30) { (try? encrypted.read(key: "token")) == json(#""pending""#) })
    }

    /// A value of an encrypted prefixed directory that does not open: the error names the file.
    @Test func aValueOfAnEncryptedPrefixedStoreThatDoesNotOpenNamesItsFile() throws {
        try withTemporaryDirectory { directory in
            try Data("garbage, not sealed".utf8).write(to: directory.appendingPathComponent("app.token"))
            let storage = WLStorage(
                key: "token", defaultValue: "", flushInterval: nil,
                store: WLStorageDirectoryStore.directory(directory).prefixed("app.").encrypted(with: key))
            let error = try #require(storage.lastError)
            #expect(error.code == .decodingFailed)
            #expect(error.path == directory.appendingPathComponent("app.token").path)
        }
    }

    /// The same through `.encrypted` over a prefixed store, and a directory's error: the file is never replaced.
    @Test func aPrefixedEncryptedValueThatDoesNotOpenIsNeverReplaced() throws {
        try withTemporaryDirectory { directory in
            let other = try WLStorageEncryptionKey.random()
            try WLStorageDirectoryStore.directory(directory).prefixed("app.").encrypted(with: other)
                .write(key: "token", data: json(#""other-secret""#))
            let sealed = try #require(file("app.token", in: directory))
            do {
                let storage = WLStorage(
                    key: "token", defaultValue: "", flushInterval: nil,
                    store: WLStorageDirectoryStore.directory(directory).prefixed("app.").encrypted(with: key))
                #expect(storage.lastError?.code == .decodingFailed)
                storage.wrappedValue = "replacement"
                storage.flush()
                #expect(file("app.token", in: directory) == sealed)
            }
            #expect(file("app.token", in: directory) == sealed)
        }
    }

    /// Bytes that do not open, then a change made on the default, then a value that opens stored by another program:
    /// that value wins, and the change is dropped with changeDiscarded.
    @Test func aValueThatOpensReplacesChangesMadeWhileTheBytesDidNotOpen() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("token")
            try Data("not sealed at all".utf8).write(to: url)
            let storage = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store(directory))
            #expect(storage.lastError?.code == .decodingFailed)
            storage.wrappedValue = "based-on-default"
            storage.flush()
            #expect(FileManager.default.contents(atPath: url.path) == Data("not sealed at all".utf8))
            // Another program with the key stores a value, by a rename over the file.
            let sealed = try SealedBox.seal(json(#""theirs""#), key: key.bytes, associatedKey: "token")
            let temporary = directory.appendingPathComponent("outside.tmp")
            try sealed.write(to: temporary)
            rename(temporary.path, url.path)
            #expect(eventually { storage.wrappedValue == "theirs" })
            #expect(eventually { !storage.hasPendingChanges })
            // Reported by the check that took the value, once it has left the cell's lock: just after the value is seen.
            #expect(
                eventually {
                    ReportedErrors.errors(where: { $0.code == .changeDiscarded && $0.key == "token" }).isEmpty == false
                })
            storage.flush()
            #expect(FileManager.default.contents(atPath: url.path) == sealed)
        }
    }

    /// A value under another key survives every path that writes: set, update, flush, release, flushAll, a second
    /// storage of the key, a storage with migrations; once the file is removed, the pending change is written.
    @Test func aValueUnderAnotherKeyIsNeverOverwrittenByAnyPathThatWrites() throws {
        struct Old: Codable { var n: Int }
        try withTemporaryDirectory { directory in
            let other = try WLStorageEncryptionKey.random()
            try store(directory, key: other).write(key: "v", data: json("41"))
            let sealed = try #require(file("v", in: directory))
            let first = WLStorage(key: "v", defaultValue: 0, flushInterval: 0, store: store(directory))
            #expect(first.lastError?.code == .decodingFailed)
            #expect(first.lastError?.path == directory.appendingPathComponent("v").path)
            first.wrappedValue = 1
            first.update { $0 += 1 }
            first.flush()
            #expect(file("v", in: directory) == sealed)
            // Every live cell is looked at, and this test's flushed: not those the tests beside keep pending.
            ShutdownHandling.flushEverything(only: { $0 === first.cell })
            #expect(file("v", in: directory) == sealed)
            do {
                let second = WLStorage(key: "v", defaultValue: 0, flushInterval: 0, store: store(directory))
                second.wrappedValue = 3
                second.flush()
                let migrating = WLStorage(
                    key: "v", defaultValue: 0, flushInterval: 0, store: store(directory),
                    migrations: [.from(Old.self) { $0.n }])
                #expect(migrating.lastError?.code == .decodingFailed)
                migrating.update { $0 += 10 }
                migrating.flush()
            }
            #expect(file("v", in: directory) == sealed)
            #expect(first.hasPendingChanges)
            #expect(!ReportedErrors.errors(under: directory).contains { $0.code == .decodingFailed && $0.path == nil })
            // One store, so one cell: 3, then 13 from the update of the migrating storage.
            #expect(first.wrappedValue == 13)
            // Once the file is gone, the pending change is written, encrypted under this store's key.
            try FileManager.default.removeItem(at: directory.appendingPathComponent("v"))
            first.flush()
            #expect(eventually { (try? store(directory).read(key: "v")) == json("13") })
            #expect(eventually { !first.hasPendingChanges })
        }
    }

    /// The store's own damaged values (cut short, one bit flipped, garbage, another key's file, another store's file)
    /// are errors naming the file, kept as they are after a set, a flush and a release. (Plain JSON is no one's sealed
    /// value: it is kept aside, see `MixedVersionTests`.)
    @Test func damagedValuesAreReportedWithTheirFileAndKeptAfterSetsAndRelease() throws {
        try withTemporaryDirectory { directory in
            try store(directory).write(key: "good", data: json(#""the-secret-value""#))
            try store(directory).write(key: "neighbour", data: json(#""the-neighbours-value""#))
            let good = try #require(file("good", in: directory))
            var flipped = good
            flipped[flipped.count - 1] ^= 0x80
            var flippedHeader = good
            flippedHeader[4] ^= 0x01  // the version
            let otherStore = WLStorageEncryptedStore(
                .directory(directory.appendingPathComponent("elsewhere")), key: try .random())
            try otherStore.write(key: "good", data: json(#""other""#))
            let cases: [(String, Data)] = [
                ("cut short", good.prefix(good.count - 1)),
                ("header only", good.prefix(21)),
                ("magic only", good.prefix(4)),
                ("bit flipped", flipped),
                ("version changed", flippedHeader),
                ("garbage", Data((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) })),
                ("another key's file", try #require(file("neighbour", in: directory))),
                ("another store's file", try #require(file("good", in: directory.appendingPathComponent("elsewhere")))),
            ]
            // A key for each case: a released storage with a change left is kept until the change is written, and a
            // storage of its key created meanwhile would join it.
            for (index, (name, bytes)) in cases.enumerated() {
                let key = "k\(index)"
                let url = directory.appendingPathComponent(key)
                try bytes.write(to: url)
                do {
                    let storage = WLStorage(
                        key: key, defaultValue: "default", flushInterval: 0, store: store(directory))
                    #expect(storage.wrappedValue == "default", "\(name)")
                    let error = storage.lastError
                    #expect(error?.code == .decodingFailed, "\(name)")
                    #expect(error?.path == url.path, "\(name)")
                    #expect(error?.description.contains("secret") == false, "\(name)")
                    storage.wrappedValue = "changed"
                    storage.update { $0 += "!" }
                    storage.flush()
                    #expect(FileManager.default.contents(atPath: url.path) == bytes, "\(name)")
                }
                #expect(FileManager.default.contents(atPath: url.path) == bytes, "\(name): after the release")
                #expect(entries(of: directory).filter { $0.hasPrefix(key) } == [key], "\(name): nothing moved aside")
                try FileManager.default.removeItem(at: url)
                // The released storage's pending change goes to the file once it is gone: wait for it.
                _ = eventually { FileManager.default.fileExists(atPath: url.path) }
                try? FileManager.default.removeItem(at: url)
            }
        }
    }

    /// A value that another program stores under a key this program lacks, while its storage lives: the program
    /// reports it and leaves it as it is (KeepingSecrets: "A program that lacks the key of a value reports it and
    /// leaves it as it is"), so a later set must not replace it.
    @Test func anOutsideValueUnderAKeyThisProgramLacksIsNotReplacedByALaterSet() throws {
        try withTemporaryDirectory { directory in
            let newer = try WLStorageEncryptionKey.random()
            let storage = WLStorage(key: "token", defaultValue: "", flushInterval: 0, store: store(directory))
            storage.wrappedValue = "old-token"
            storage.flush()
            // Another program, already on the new key, stores a value (a rename over the file, as the library does).
            let sealed = try SealedBox.seal(json(#""new-token""#), key: newer.bytes, associatedKey: "token")
            let temporary = directory.appendingPathComponent("outside.tmp")
            try sealed.write(to: temporary)
            rename(temporary.path, directory.appendingPathComponent("token").path)
            #expect(
                eventually {
                    ReportedErrors.errors(under: directory).contains { $0.code == .decodingFailed && $0.key == "token" }
                })
            storage.wrappedValue = "set-after"
            storage.flush()
            #expect(file("token", in: directory) == sealed)
        }
    }

    /// `NAME~before-type-change` and `NAME~corrupt-…` copies of an encrypted value are encrypted too.
    @Test func keptCopiesOfAnEncryptedValueAreEncrypted() throws {
        struct Before: Codable { var user: String }
        struct After: Codable, Equatable { var login: String }
        try withTemporaryDirectory { directory in
            try store(directory).write(key: "login", data: json(#"{"user":"ada-secret-login"}"#))
            try store(directory).write(key: "pin", data: json(#"{"pin":"9417-secret-pin"}"#))
            let login = WLStorage(
                key: "login", defaultValue: After(login: ""), flushInterval: nil, store: store(directory),
                migrations: [.from(Before.self) { After(login: $0.user) }])
            #expect(login.wrappedValue == After(login: "ada-secret-login"))
            let pin = WLStorage(key: "pin", defaultValue: 0, flushInterval: nil, store: store(directory))
            // JSON another version of the type stored: left as it is, and reported without quoting it.
            #expect(pin.lastError?.code == .storedByAnotherVersion)
            #expect(pin.lastError?.description.contains("9417") == false)
            pin.flush()
            let names = entries(of: directory)
            #expect(names.contains { $0.contains("~corrupt") || $0.count == 64 }, "\(names)")
            // login, its copy from before the type change, and pin as it was.
            #expect(names.count == 3, "\(names)")
            for name in names {
                let bytes = try #require(file(name, in: directory))
                #expect(bytes.starts(with: Data("WLSE".utf8)), "\(name)")
                #expect(bytes.range(of: Data("secret".utf8)) == nil, "\(name)")
                #expect(mode(of: directory.appendingPathComponent(name)) == 0o600, "\(name)")
            }
            login.flush()
        }
    }

    /// Where another program's sealed value comes, while plain bytes are being kept aside.
    enum SealedValueArrival: CaseIterable, Sendable {
        /// Just before the key's file is checked for the removal.
        case atTheCheck
        /// After the check, just as the file is moved out of the key's way to be removed.
        case atTheMove
    }

    /// Plain JSON under an encrypted store (what a program started without the key saves) is kept aside when a storage
    /// opens the key, and removed from the key only while the key still holds it: a sealed value another program
    /// stores in the moment between the comparison and the removal stays the key's value, and the storage reads it.
    @Test(arguments: SealedValueArrival.allCases)
    func aSealedValueStoredWhilePlainBytesAreKeptAsideStays(arrival: SealedValueArrival) throws {
        try withTemporaryDirectory { directory in
            try Data("5".utf8).write(to: directory.appendingPathComponent("n"))
            let sealed = try withTemporaryDirectory { elsewhere in
                try store(elsewhere).write(key: "n", data: json("20"))
                return try #require(file("n", in: elsewhere))
            }
            let reads = Atomic<Int>(0)
            let arrived = Switch(false)
            FaultInjection.install(
                { call, name in
                    guard !arrived.isOn, let name else { return nil }
                    let now: Bool
                    switch arrival {
                    case .atTheCheck:
                        // The second read of the key is the comparison's; the next look at its file is the removal's.
                        if call == .read, name == "n" { reads.add(1, ordering: .sequentiallyConsistent) }
                        now = call == .stat && name == "n" && reads.load(ordering: .sequentiallyConsistent) >= 2
                    case .atTheMove:
                        now = call == .rename && name.hasPrefix("n~") && name.hasSuffix(".tmp")
                    }
                    if now {
                        arrived.set(true)
                        try? writeFromOutside(sealed, "n", in: directory)
                    }
                    return nil
                },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let storage = WLStorage(key: "n", defaultValue: -1, flushInterval: nil, store: store(directory))
            #expect(arrived.isOn, "the sealed value was not stored during the keeping aside")
            #expect(file("n", in: directory) == sealed, "the sealed value was removed with the plain bytes")
            #expect(eventually { storage.wrappedValue == 20 }, "the storage holds \(storage.wrappedValue)")
            let left = entries(of: directory).filter { $0 != "n" }
            #expect(left.allSatisfy { !$0.hasSuffix(".tmp") }, "\(left)")
        }
    }
}
