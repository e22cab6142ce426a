// The default backer's files: how they are written, and what is found at a key's name left alone or moved aside.
import Foundation
import Synchronization
import Testing
import WLStorageCrypto

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct DefaultBackerFileTests {
    @Test func aMissingFileGivesTheDefaultAndSavesIt() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("count", in: directory, default: 5)
            #expect(storage.wrappedValue == 5)
            storage.flush()
            #expect(stored(Int.self, key: "count", in: directory) == 5)
        }
    }

    @Test func anEmptyFileGivesTheDefault() throws {
        try withTemporaryDirectory { directory in
            try Data().write(to: directory.appendingPathComponent("count"))
            let storage = fileStorage("count", in: directory, default: 5)
            #expect(storage.wrappedValue == 5)
            #expect(storage.lastError == nil)
        }
    }

    @Test func filesAre0600AndCreatedDirectories0700WhateverTheUmask() throws {
        try withTemporaryDirectory { directory in
            let previous = umask(0)
            defer { umask(previous) }
            let nested = directory.appendingPathComponent("a/b/c", isDirectory: true)
            let storage = fileStorage("k", in: nested, default: 1, flushInterval: nil)
            storage.wrappedValue = 2
            storage.flush()
            #expect(mode(of: nested.appendingPathComponent("k")) == 0o600)
            #expect(mode(of: nested) == 0o700)
            #expect(mode(of: directory.appendingPathComponent("a")) == 0o700)
            #expect(mode(of: directory.appendingPathComponent("a/b")) == 0o700)
        }
    }

    @Test func manyWritesLeaveNoTemporaryFile() throws {
        try withTemporaryDirectory { directory in
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: 0)
            for value in 1...50 {
                storage.wrappedValue = value
                if value % 5 == 0 { storage.flush() }
            }
            storage.flush()
            #expect(entries(of: directory) == ["k"])
            #expect(stored(Int.self, key: "k", in: directory) == 50)
        }
    }

    @Test func temporaryFilesLeftByACrashedWriterAreRemovedWhenTheDirectoryIsOpened() throws {
        try withTemporaryDirectory { directory in
            for name in ["k~0011223344556677.tmp", "other~8899aabbccddeeff.tmp"] {
                try Data("{\"torn".utf8).write(to: directory.appendingPathComponent(name))
            }
            let storage = fileStorage("k", in: directory, default: 1, flushInterval: nil)
            #expect(storage.wrappedValue == 1)
            storage.flush()
            #expect(entries(of: directory) == ["k"])
        }
    }

    @Test func theTemporaryFileOfAWriterStillAtWorkIsNeverRemoved() throws {
        try withTemporaryDirectory { directory in
            let name = "k~aaaaaaaaaaaaaaaa.tmp"
            let path = directory.appendingPathComponent(name).path
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            try #require(fd >= 0)
            // A writer holds this lock from creating its temporary file until it has renamed it. Closed on exec: a
            // child process another test starts meanwhile would keep the lock past the `close` below.
            #expect(flock(fd, LOCK_EX) == 0)
            let backerDirectory = StorageDirectory(path: directory.path)
            #expect(try backerDirectory.removeAbandonedTemporaryFiles() == [])
            #expect(entries(of: directory) == [name])
            close(fd)
            #expect(try backerDirectory.removeAbandonedTemporaryFiles() == [name])
            #expect(entries(of: directory) == [])
        }
    }

    /// Keys that are not safe file names. Those that would lead out of the storage directory lead to a sentinel file
    /// in the test's own temporary folder, beside the directory: `ROOT` stands for that folder's path, `FOLDER` for its
    /// name.
    @Test(arguments: [
        "", ".", "..", "../escape", "../outside/sentinel", "../../FOLDER/outside/sentinel", "ROOT/outside/sentinel",
        "/../ROOT/outside/sentinel", "a/b", "with space", "ключ", String(repeating: "k", count: 300), "k~1.tmp",
    ])
    func anUnsafeKeyStaysInsideTheDirectoryUnderItsHash(key template: String) throws {
        try withTemporaryDirectory { outer in
            let sentinel = try Sentinel(in: outer)
            let key = template.replacingOccurrences(of: "ROOT", with: outer.path)
                .replacingOccurrences(of: "FOLDER", with: outer.lastPathComponent)
            let directory = outer.appendingPathComponent("store", isDirectory: true)
            do {
                let storage = fileStorage(key, in: directory, default: "", flushInterval: nil)
                storage.wrappedValue = "v"
                storage.flush()
                #expect(storage.lastError == nil)
            }
            #expect(sentinel.isUnchanged, "\(key) reached \(sentinel.path): \(entries(of: sentinel.folder))")
            #expect(entries(of: outer) == ["outside", "store"])
            #expect(entries(of: directory) == [SHA256.hexDigest(of: key)!])
            #expect(fileStorage(key, in: directory, default: "", flushInterval: nil).wrappedValue == "v")
        }
    }

    @Test(arguments: [Data("\"a string, not an Int\"".utf8), Data("null".utf8)])
    func aFileOfJSONThatDoesNotDecodeIsLeftAsItIsUntilTheValueIsSet(contents: Data) throws {
        try withTemporaryDirectory { directory in
            try contents.write(to: directory.appendingPathComponent("count"))
            let storage = fileStorage("count", in: directory, default: 7, flushInterval: nil)
            #expect(storage.wrappedValue == 7)
            #expect(storage.lastError?.code == .storedByAnotherVersion)
            // Something is stored, so no default is saved over it, and nothing is moved aside.
            storage.flush()
            #expect(entries(of: directory) == ["count"])
            #expect(try Data(contentsOf: directory.appendingPathComponent("count")) == contents)

            storage.wrappedValue = 8
            storage.flush()
            #expect(stored(Int.self, key: "count", in: directory) == 8)
            #expect(entries(of: directory) == ["count"])
        }
    }

    @Test(arguments: [
        Data("not json".utf8), Data("{\"torn\": [1, 2".utf8), Data([0xff, 0xfe, 0x00, 0x01, 0x80]),
    ])
    func aFileThatIsNotJSONIsMovedAsideAndKept(contents: Data) throws {
        try withTemporaryDirectory { directory in
            try contents.write(to: directory.appendingPathComponent("count"))
            let storage = fileStorage("count", in: directory, default: 7, flushInterval: nil)
            #expect(storage.wrappedValue == 7)
            // Reported; `lastError` may already be `nil` again, once the default is saved in the background.
            #expect(ReportedErrors.errors(under: directory).contains { $0.code == .decodingFailed })
            // Nothing is stored now, so the default is saved beside the kept file.
            storage.flush()
            #expect(stored(Int.self, key: "count", in: directory) == 7)
            let names = entries(of: directory).filter { $0 != "count" }
            #expect(names.count == 1)
            let aside = try #require(names.first)
            #expect(aside.hasPrefix("count~corrupt-"))
            #expect(try Data(contentsOf: directory.appendingPathComponent(aside)) == contents)

            storage.wrappedValue = 8
            storage.flush()
            #expect(stored(Int.self, key: "count", in: directory) == 8)
            #expect(try Data(contentsOf: directory.appendingPathComponent(aside)) == contents)
        }
    }

    /// A file that is not JSON, replaced by another program's set in the moment between the storage's check of the
    /// file and its move aside: the set is not moved aside with it (nor lost), but stays the key's value, and the
    /// storage reads it.
    @Test func aSetStoredJustAsAnUnreadableFileIsMovedAsideStaysInPlace() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("count")
            try Data("not json".utf8).write(to: file)
            let outsideWrite = Switch(true)
            FaultInjection.install(
                { call, name in
                    if call == .rename, let name, name.hasPrefix("count~corrupt-"), outsideWrite.isOn {
                        outsideWrite.set(false)
                        try? replaceFromOutside(file, with: "42")
                    }
                    return nil
                },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let storage = fileStorage("count", in: directory, default: 7, flushInterval: nil)
            #expect(!outsideWrite.isOn, "the file was not moved aside")
            #expect(storage.wrappedValue == 42, "the storage did not read the key again")
            storage.flush()
            #expect(stored(Int.self, key: "count", in: directory) == 42, "the set was moved aside or replaced")
            #expect(storage.wrappedValue == 42)
            let kept = entries(of: directory).filter { $0.hasPrefix("count~corrupt-") }
            #expect(kept.isEmpty, "kept aside: \(kept)")
        }
    }

    @Test func aSymlinkIsNeitherFollowedNorReplaced() throws {
        try withTemporaryDirectory { outer in
            let directory = outer.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let target = outer.appendingPathComponent("target")
            try Data("1".utf8).write(to: target)
            try FileManager.default.createSymbolicLink(
                at: directory.appendingPathComponent("count"), withDestinationURL: target)

            let storage = fileStorage("count", in: directory, default: 5, flushInterval: nil)
            #expect(storage.wrappedValue == 5)
            #expect(storage.lastError?.code == .notARegularFile)
            storage.wrappedValue = 6
            storage.flush()
            #expect(storage.lastError?.code == .notARegularFile)
            #expect(storage.hasPendingChanges)
            #expect(
                try FileManager.default.destinationOfSymbolicLink(
                    atPath: directory.appendingPathComponent("count").path)
                    == target.path)
            #expect(try Data(contentsOf: target) == Data("1".utf8))
            #expect(entries(of: directory) == ["count"])
        }
    }

    @Test func aDirectoryWhereTheFileShouldBeIsLeftAlone() throws {
        try withTemporaryDirectory { directory in
            let inner = directory.appendingPathComponent("count", isDirectory: true)
            try FileManager.default.createDirectory(at: inner, withIntermediateDirectories: false)
            try Data("x".utf8).write(to: inner.appendingPathComponent("inside"))
            let storage = fileStorage("count", in: directory, default: 5, flushInterval: nil)
            #expect(storage.wrappedValue == 5)
            #expect(storage.lastError?.code == .notARegularFile)
            storage.wrappedValue = 6
            storage.flush()
            #expect(storage.lastError?.code == .notARegularFile)
            #expect(entries(of: inner) == ["inside"])
        }
    }

    @Test func aFIFOWhereTheFileShouldBeIsNotOpened() throws {
        try withTemporaryDirectory { directory in
            #expect(mkfifo(directory.appendingPathComponent("count").path, 0o600) == 0)
            let storage = fileStorage("count", in: directory, default: 5, flushInterval: nil)
            #expect(storage.wrappedValue == 5)
            #expect(storage.lastError?.code == .notARegularFile)
        }
    }

    @Test func errorsReachTheHandlerAsTheyHappen() throws {
        try withTemporaryDirectory { directory in
            try Data("garbage".utf8).write(to: directory.appendingPathComponent("reported"))
            // The test process's handler records every error (ReportedErrors); no test replaces it, since the handler
            // is process-wide and tests run in parallel. The read's error reaches it before the initializer returns.
            _ = fileStorage("reported", in: directory, default: 0, flushInterval: nil)
            let errors = ReportedErrors.errors(under: directory)
            #expect(errors.map(\.code) == [.decodingFailed])
            #expect(errors.first?.key == "reported")
            #expect(errors.first?.path == directory.appendingPathComponent("reported").path)
            #expect(errors.first?.underlying is DecodingError)
        }
    }

    @Test func noDirectoryIsAnErrorNotACrash() {
        let storage = WLStorage(
            defaultValueClosure: { 3 }, flushInterval: nil,
            backer: WLStorageDefaultBacker<Int>(key: "k", directory: nil))
        #expect(storage.wrappedValue == 3)
        #expect(storage.lastError?.code == .directoryUnavailable)
        storage.wrappedValue = 4
        storage.flush()
        #expect(storage.wrappedValue == 4)
        #expect(storage.lastError?.code == .directoryUnavailable)
    }

    @Test func theFileURLNamesTheFileInTheDirectory() throws {
        try withTemporaryDirectory { directory in
            let backer = WLStorageDefaultBacker<Int>(key: "a/b", directory: directory)
            #expect(backer.fileURL?.deletingLastPathComponent().path == directory.path)
            #expect(backer.fileURL?.lastPathComponent == SHA256.hexDigest(of: "a/b"))
        }
    }

    private struct Unordered: Codable, Sendable, Equatable {
        var zebra = 1
        var apple = 2
        var mango = ["b": 1, "a": 2]
    }

    @Test func filesHoldJSONWithSortedKeysSoThatEqualValuesGiveEqualFiles() throws {
        try withTemporaryDirectory { directory in
            // Dictionaries hand out their keys in a different order in each process and after each change.
            var first: [String: Int] = [:]
            var second: [String: Int] = [:]
            for number in 0..<200 { first["key\(number)"] = number }
            for number in (0..<200).reversed() { second["key\(number)"] = number }
            let backer = WLStorageDefaultBacker<[String: Int]>(key: "map", directory: directory)
            try backer.write(value: first)
            let firstBytes = try Data(contentsOf: directory.appendingPathComponent("map"))
            try backer.write(value: second)
            #expect(try Data(contentsOf: directory.appendingPathComponent("map")) == firstBytes)

            let structured = WLStorageDefaultBacker<Unordered>(key: "struct", directory: directory)
            try structured.write(value: Unordered())
            let text = try String(contentsOf: directory.appendingPathComponent("struct"), encoding: .utf8)
            #expect(text == #"{"apple":2,"mango":{"a":2,"b":1},"zebra":1}"#)
            #expect(try JSONDecoder().decode(Unordered.self, from: Data(text.utf8)) == Unordered())
        }
    }
}
