// Keys from files and the environment: whatever is not a key is refused at once with a clear reason, and no secret is
// shown.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput)
struct EncryptionKeyLoadingTests: EncryptedDirectorySuite {
    let key = try! WLStorageEncryptionKey.random()

    /// A FIFO, /dev/zero, a symlink to /dev/zero and a huge file are refused at once, with a reason.
    ///
    /// "At once" is not timed: each load runs on a thread of its own, and must end within 60 s. A reader that opened the
    /// FIFO (no writer ever comes) or read /dev/zero or the terabyte to its end would not, however fast the machine.
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
                let refused = TakenFlag(false)
                let ended = finishes(within: 60) {
                    do {
                        _ = try WLStorageEncryptionKey(contentsOf: url)
                    } catch is WLStorageError {
                        refused.set(true)
                    } catch {}
                }
                #expect(ended, "loading \(url.lastPathComponent) did not end")
                #expect(refused.isSet, "\(url.lastPathComponent) was not refused")
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

    /// An environment variable holds the base64 text of the key: 32 characters that are not base64 are no key.
    @Test func anEnvironmentVariableOf32CharactersThatAreNotBase64IsRefused() throws {
        let name = "WLSTORAGE_TEST_KEY_\(UInt32.random(in: 0...UInt32.max))"
        defer { unsetenv(name) }
        // `openssl rand -hex 16`: 32 characters, 16 bytes of entropy, not the base64 text of a 32-byte key.
        setenv(name, "00112233445566778899aabbccddeeff", 1)
        let error = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(environmentVariable: name) }
        #expect(error.code == .invalidConfiguration)
    }

    @Test func malformedEnvironmentVariablesAreRefusedWithClearErrors() throws {
        let name = "WLSTORAGE_TEST_KEY_\(UInt32.random(in: 0...UInt32.max))"
        defer { unsetenv(name) }
        unsetenv(name)
        let unset = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(environmentVariable: name) }
        #expect(unset.code == .invalidConfiguration)
        #expect(unset.message.contains(name))
        let secret = key.base64EncodedSecret
        for text in [
            "", "   ", "not base64!", String(secret.dropLast(4)), secret + "AAAA",
            Data(count: 31).base64EncodedString(),
        ] {
            setenv(name, text, 1)
            let error = try #require(throws: WLStorageError.self) {
                try WLStorageEncryptionKey(environmentVariable: name)
            }
            #expect(error.code == .invalidConfiguration)
            if !text.isEmpty && !text.allSatisfy({ $0 == " " }) { #expect(!error.description.contains(text)) }
        }
        setenv(name, "\n " + secret + " \n", 1)
        #expect(try WLStorageEncryptionKey(environmentVariable: name).bytes == key.bytes)
    }

    @Test func keyFilesWithGroupOrOtherPermissionsOrNoKeyAreRefused() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("storage.key")
            try Data((key.base64EncodedSecret + "\n").utf8).write(to: url)
            for mode: mode_t in [0o644, 0o640, 0o604, 0o660, 0o606, 0o610, 0o601, 0o700 | 0o020] {
                chmod(url.path, mode)
                let error = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
                #expect(error.code == .invalidConfiguration, "mode \(String(mode, radix: 8))")
                #expect(error.message.contains("chmod 600"))
                #expect(!error.description.contains(key.base64EncodedSecret))
            }
            // A symlink to such a file is refused; a symlink to a private file is read.
            chmod(url.path, 0o644)
            let link = directory.appendingPathComponent("link.key")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: url)
            #expect(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: link) }
            chmod(url.path, 0o400)
            #expect(try WLStorageEncryptionKey(contentsOf: link).bytes == key.bytes)
            chmod(url.path, 0o600)
            // White space around the base64 text is ignored.
            try Data(("\n\t  " + key.base64EncodedSecret + " \r\n\n").utf8).write(to: url)
            #expect(try WLStorageEncryptionKey(contentsOf: url).bytes == key.bytes)
            // No key: empty, 31 or 33 raw bytes, base64 of 31 or 33 bytes.
            for contents in [
                Data(), Data(repeating: 7, count: 31), Data(repeating: 7, count: 33),
                Data(Data(repeating: 7, count: 31).base64EncodedString().utf8),
                Data(Data(repeating: 7, count: 33).base64EncodedString().utf8),
            ] {
                try contents.write(to: url)
                chmod(url.path, 0o600)
                let error = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
                #expect(error.code == .invalidConfiguration)
                #expect(error.path == url.path)
            }
            // A directory, private or not, is no key file.
            let folder = directory.appendingPathComponent("keydir")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            for mode: mode_t in [0o700, 0o755] {
                chmod(folder.path, mode)
                let error = try #require(throws: WLStorageError.self) {
                    try WLStorageEncryptionKey(contentsOf: folder)
                }
                #expect(error.code == .invalidConfiguration)
            }
            // A missing file.
            let missing = try #require(throws: WLStorageError.self) {
                try WLStorageEncryptionKey(contentsOf: directory.appendingPathComponent("absent"))
            }
            #expect(missing.code == .invalidConfiguration)
        }
    }

    /// A directory given as the key file: refused with a reason that is true (not a stale errno such as ENOTTY).
    @Test func aDirectoryAsKeyFileIsRefusedWithATrueReason() throws {
        try withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("keydir")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            chmod(folder.path, 0o700)
            let error = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: folder) }
            #expect(error.code == .invalidConfiguration)
            #expect(
                error.errno == EISDIR || error.message.contains("directory") || error.message.contains("regular file"),
                "\(error) errno \(error.errno.map { String(cString: strerror($0)) } ?? "none")")
        }
    }

    /// Printing, interpolating or dumping a key, a store or a storage must not reveal the key or the value.
    @Test func descriptionsOfKeysStoresStoragesAndErrorsRevealNoSecret() throws {
        try withTemporaryDirectory { directory in
            let encrypted = store(directory)
            let storage = WLStorage(key: "pw", defaultValue: "", flushInterval: nil, store: encrypted)
            storage.wrappedValue = "correct-horse-battery"
            storage.flush()
            let secret = key.base64EncodedSecret
            let bytes = key.bytes.map(String.init).joined(separator: ", ")
            for text in [
                "\(key)", String(reflecting: key), "\(encrypted)", String(reflecting: encrypted), "\(storage)",
                String(reflecting: storage), "\([key])", String(reflecting: Optional(key)),
            ] {
                #expect(!text.contains(secret) && !text.contains("correct-horse"), "\(text)")
                #expect(!text.contains(bytes), "\(text)")
            }
        }
    }

    /// `dump` (and debuggers, and anything that reflects through `Mirror`) must not show the key's bytes: the key
    /// and the encrypted store hold them in stored properties with no custom mirror.
    @Test func dumpingAKeyOrAnEncryptedStoreShowsNotTheKeysBytes() throws {
        func showsKey(_ value: Any) -> Bool {
            var dumped = ""
            dump(value, to: &dumped)
            let numbers = dumped.split(separator: "\n").compactMap { line -> UInt8? in
                let text = line.trimmingCharacters(in: .whitespaces)
                return text.hasPrefix("- ") ? UInt8(text.dropFirst(2)) : nil
            }
            return numbers.indices.contains { Array(numbers.dropFirst($0).prefix(32)) == key.bytes }
        }
        #expect(!showsKey(key))
        #expect(!showsKey(WLStorageEncryptedStore(.directory(URL(fileURLWithPath: "/nonexistent")), key: key)))
    }

    /// A key file of exactly 64 KiB (the key's text padded with white space) is read; one byte more is refused.
    @Test func aKeyFileOfExactly64KiBIsReadAndOneByteMoreIsRefused() throws {
        try withTemporaryDirectory { root in
            let key = try WLStorageEncryptionKey.random()
            let text = Data((key.base64EncodedSecret + "\n").utf8)
            for (size, accepted) in [(65_536, true), (65_537, false)] {
                let url = root.appendingPathComponent("k\(size)")
                try (text + Data(repeating: UInt8(ascii: " "), count: size - text.count)).write(to: url)
                #expect(chmod(url.path, 0o600) == 0)
                let read = try? WLStorageEncryptionKey(contentsOf: url)
                #expect((read != nil) == accepted, "size \(size)")
                if let read { #expect(read.base64EncodedSecret == key.base64EncodedSecret) }
            }
        }
    }
}
