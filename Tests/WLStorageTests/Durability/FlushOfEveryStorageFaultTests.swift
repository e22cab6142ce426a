// A flush of every storage of one directory store whose writes fail (EIO, ENOSPC, EMFILE at any step of the file
// writer): what it reports written is on disk, what failed stays pending with its error, the file as it was, and the
// change is written later, by the next flush or, for a storage released meanwhile, by the retry.
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct FlushOfEveryStorageFaultTests {
    struct Counter: Codable, Sendable, Equatable {
        var n = 0
    }

    /// How the directory is used: its files directly, or through an encrypted store (one batch of the whole store).
    enum Path: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case files, encrypted
        var testDescription: String { rawValue }
    }

    /// The call failed for key number `index`, or `nil` for a key whose writes succeed.
    static func failing(_ index: Int) -> (SystemCall, onTemporary: Bool)? {
        switch index % 5 {
        case 0: (.open, true)
        case 1: (.write, true)
        case 2: (.fsync, true)
        case 3: (.rename, false)
        default: nil
        }
    }

    @Test(arguments: Path.allCases, [SystemError.eio, .enospc, .emfile])
    func failedWritesOfAFlushOfEveryStorageStayPendingAndAreWrittenLater(path: Path, fault: SystemError) throws {
        try withTemporaryDirectory { directory in
            let keys = (0..<20).map { String(format: "k%02d", $0) }
            for key in keys {
                try Data(#"{"n":0,"other":1}"#.utf8).write(to: directory.appendingPathComponent(key))
            }
            let store: any WLStorageStore =
                path == .files
                ? WLStorageDirectoryStore.directory(directory)
                : WLStorageDirectoryStore.directory(directory).encrypted(with: try WLStorageEncryptionKey.random())
            if path == .encrypted {
                // Sealed first, as an encrypted store's values are.
                for key in keys { try store.write(key: key, data: Data(#"{"n":0,"other":1}"#.utf8)) }
            }
            let held = HeldReference(
                keys.map { WLStorage(key: $0, defaultValue: Counter(), flushInterval: nil, store: store) })
            let storages = try #require(held.current)
            #expect(storages.allSatisfy { $0.wrappedValue == Counter() && $0.lastError == nil })
            #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
            for (index, storage) in storages.enumerated() { storage.wrappedValue.n = index + 1 }
            let code = fault.code
            FaultInjection.install(
                { call, name in
                    guard let name, let index = keys.firstIndex(where: { name == $0 || name.hasPrefix($0 + "~") }),
                        let (failed, onTemporary) = Self.failing(index), call == failed,
                        onTemporary == (name != keys[index])
                    else { return nil }
                    return .fail(code)
                }, forDirectory: directory.standardizedFileURL.path)
            var removed = false
            defer { if !removed { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) } }

            flushAllStores([store])
            func stored(_ key: String) throws -> [String: Int] {
                let data = try #require(try store.read(key: key))
                return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Int])
            }
            for (index, storage) in storages.enumerated() {
                let at: Comment = "\(keys[index]), \(path), \(fault.testDescription)"
                if storage.hasPendingChanges {
                    // Not written: reported with its errno, the file as it was.
                    #expect(try stored(keys[index]) == ["n": 0, "other": 1], at)
                    // A file's own error; through the encrypted store, the batch's, which says what failed.
                    let error = storage.lastError
                    let errno = path == .files ? error?.errno : (error?.underlying as? WLStorageError)?.errno
                    #expect(errno == code, "\(at): \(String(describing: error))")
                } else {
                    #expect(try stored(keys[index]) == ["n": index + 1, "other": 1], at)
                }
                if Self.failing(index) != nil {
                    #expect(storage.hasPendingChanges, "\(at): a write that failed is taken for written")
                } else if path == .files {
                    #expect(!storage.hasPendingChanges, "\(at): \(String(describing: storage.lastError))")
                }
            }
            // Half the storages let go while their writes still fail: their release cannot write either.
            let released = keys.indices.filter { $0 % 2 == 0 }
            held.hold(storages.enumerated().filter { !released.contains($0.offset) }.map(\.element))
            let kept = try #require(held.current)
            _ = consume storages

            FaultInjection.remove(forDirectory: directory.standardizedFileURL.path)
            removed = true
            // The released ones are written by the retry, with no flush; the others by the next flush.
            #expect(
                eventually(timeout: 120) {
                    released.allSatisfy { (try? stored(keys[$0])) == ["n": $0 + 1, "other": 1] }
                }, "\(released.map { (try? stored(keys[$0])) ?? [:] })")
            flushAllStores([store])
            for storage in kept {
                #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
            }
            for (index, key) in keys.enumerated() {
                #expect(try stored(key) == ["n": index + 1, "other": 1], "\(key)")
            }
        }
    }

    /// The directory's `fsync`, after each file is renamed into place, fails for every write of the flush: each file
    /// holds its new value, but no write is known durable, so none is reported written; the next flush writes them again.
    @Test(arguments: [SystemError.eio, .enospc])
    func writesWhoseDirectorySyncFailsInAFlushOfEveryStorageStayPending(fault: SystemError) throws {
        try withTemporaryDirectory { directory in
            let keys = (0..<12).map { String(format: "k%02d", $0) }
            for key in keys { try Data(#"{"n":0}"#.utf8).write(to: directory.appendingPathComponent(key)) }
            let store = WLStorageDirectoryStore.directory(directory)
            let storages = keys.map { WLStorage(key: $0, defaultValue: Counter(), flushInterval: nil, store: store) }
            #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
            for (index, storage) in storages.enumerated() { storage.wrappedValue.n = index + 1 }
            let code = fault.code
            let path = directory.standardizedFileURL.path
            FaultInjection.install(
                { call, name in call == .fsync && name == nil ? .fail(code) : nil }, forDirectory: path)
            flushAllStores([store])
            FaultInjection.remove(forDirectory: path)
            for storage in storages {
                #expect(storage.hasPendingChanges, "a write not known durable is taken for written")
                #expect(storage.lastError?.errno == code, "\(String(describing: storage.lastError))")
            }
            flushAllStores([store])
            for (index, storage) in storages.enumerated() {
                #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
                let data = try #require(contents(of: keys[index], in: directory))
                #expect(try JSONDecoder().decode(Counter.self, from: data) == Counter(n: index + 1))
            }
        }
    }

    /// Another program replaced every file since the storages read them, and the read each write makes of the file, to
    /// put its change onto the other program's, fails: no write replaces the other program's value with its own whole.
    @Test(arguments: [SystemError.eio, .emfile])
    func writesWhoseReadOfAnotherProgramsFileFailsInAFlushOfEveryStorageLoseNothing(fault: SystemError) throws {
        try withTemporaryDirectory { directory in
            let keys = (0..<12).map { String(format: "k%02d", $0) }
            for key in keys { try Data(#"{"n":0}"#.utf8).write(to: directory.appendingPathComponent(key)) }
            let store = WLStorageDirectoryStore.directory(directory)
            let storages = keys.map { WLStorage(key: $0, defaultValue: Counter(), flushInterval: nil, store: store) }
            #expect(eventually { storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } } })
            for (index, storage) in storages.enumerated() { storage.wrappedValue.n = index + 1 }
            for key in keys {
                try Data(#"{"n":0,"other":2}"#.utf8).write(to: directory.appendingPathComponent(key), options: .atomic)
            }
            let code = fault.code
            let path = directory.standardizedFileURL.path
            FaultInjection.install(
                { call, name in call == .open && name.map(keys.contains) == true ? .fail(code) : nil },
                forDirectory: path)
            flushAllStores([store])
            FaultInjection.remove(forDirectory: path)
            for (index, storage) in storages.enumerated() {
                let data = try #require(contents(of: keys[index], in: directory))
                let stored = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Int])
                #expect(stored["other"] == 2, "\(keys[index]): the other program's field was lost: \(stored)")
                // The write that could not read what it goes onto was not made: pending, reported.
                #expect(stored["n"] == 0, "\(keys[index])")
                #expect(storage.hasPendingChanges, "\(keys[index])")
                #expect(storage.lastError?.errno == code, "\(String(describing: storage.lastError))")
            }
            #expect(
                eventually(timeout: 60) {
                    flushAllStores([store])
                    return storages.allSatisfy { !$0.hasPendingChanges }
                }, "\(storages.compactMap(\.lastError).prefix(2))")
            for (index, key) in keys.enumerated() {
                let data = try #require(contents(of: key, in: directory))
                #expect(try JSONSerialization.jsonObject(with: data) as? [String: Int] == ["n": index + 1, "other": 2])
            }
        }
    }
}
