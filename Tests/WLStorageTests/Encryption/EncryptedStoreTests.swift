import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput)
struct EncryptedStoreTests {
    private let key = try! WLStorageEncryptionKey.random()

    private func store(_ directory: URL, key: WLStorageEncryptionKey? = nil, previous: [WLStorageEncryptionKey] = [])
        -> WLStorageEncryptedStore
    {
        WLStorageEncryptedStore(.directory(directory), key: key ?? self.key, previousKeys: previous)
    }

    private func file(_ name: String, in directory: URL) -> Data? {
        FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
    }

    @Test func aValueIsStoredEncryptedInAPrivateFileAndReadBack() throws {
        try withTemporaryDirectory { directory in
            do {
                let token = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: store(directory))
                token.wrappedValue = "s3cr3t-token"
                token.flush()
            }
            let bytes = try #require(file("token", in: directory))
            #expect(bytes.starts(with: Data("WLSE".utf8)))
            #expect(!String(decoding: bytes, as: UTF8.self).contains("s3cr3t"))
            #expect(mode(of: directory.appendingPathComponent("token")) == 0o600)
            let again = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: store(directory))
            #expect(again.wrappedValue == "s3cr3t-token")
            // Two writes of the same value differ: each has a fresh nonce.
            again.wrappedValue = "s3cr3t-token"
            again.flush()
            #expect(file("token", in: directory) != bytes)
        }
    }

    @Test func everySingleBitFlipOfAStoredFileIsReportedAndTheFileIsLeftAsItIs() throws {
        try withTemporaryDirectory { directory in
            let storeForWriting = store(directory)
            try storeForWriting.write(key: "n", data: Data("7".utf8))
            let good = try #require(file("n", in: directory))
            let url = directory.appendingPathComponent("n")
            var undetected: [Int] = []
            var overwritten: [Int] = []
            for bit in 0..<(good.count * 8) {
                var flipped = good
                flipped[bit / 8] ^= 1 << (bit % 8)
                try flipped.write(to: url, options: .atomic)
                do {
                    // Released at the end of the iteration: nothing is pending, so its cell goes with it.
                    let storage = WLStorage(key: "n", defaultValue: 0, flushInterval: nil, store: store(directory))
                    if storage.wrappedValue != 0 || storage.lastError?.code != .decodingFailed {
                        undetected.append(bit)
                    }
                    storage.flush()
                }
                if file("n", in: directory) != flipped { overwritten.append(bit) }
            }
            #expect(undetected.isEmpty, "flips not detected at bits \(undetected)")
            #expect(overwritten.isEmpty, "files overwritten after flips at bits \(overwritten)")
        }
    }

    @Test func aWrongKeyIsAClearErrorNamingTheFileAndNothingIsOverwritten() throws {
        try withTemporaryDirectory { directory in
            try store(directory).write(key: "token", data: Data(#""abc""#.utf8))
            let sealed = try #require(file("token", in: directory))
            let other = try WLStorageEncryptionKey.random()
            let storage = WLStorage(
                key: "token", defaultValue: "", flushInterval: 1, store: store(directory, key: other))
            #expect(storage.wrappedValue == "")
            let error = try #require(storage.lastError)
            #expect(error.code == .decodingFailed)
            #expect(error.message.contains("encrypted with another key"))
            #expect(error.path == directory.appendingPathComponent("token").path)
            storage.wrappedValue = "replacement"
            storage.flush()
            #expect(file("token", in: directory) == sealed)
        }
    }

    @Test func oneKeysBytesCannotBePassedOffAsAnothers() throws {
        try withTemporaryDirectory { directory in
            try store(directory).write(key: "admin", data: Data("true".utf8))
            try store(directory).write(key: "guest", data: Data("false".utf8))
            try #require(file("admin", in: directory)).write(to: directory.appendingPathComponent("guest"))
            #expect(throws: WLStorageError.self) { try store(directory).read(key: "guest") }
            let guest = WLStorage(key: "guest", defaultValue: false, flushInterval: nil, store: store(directory))
            #expect(guest.wrappedValue == false)
            #expect(guest.lastError?.message.contains("do not authenticate") == true)
        }
    }

    @Test func aValueOfAnEarlierKeyIsReadAndWrittenAgainUnderTheCurrentOne() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: Data(#""abc""#.utf8))
            let rotated = store(directory, key: key, previous: [old])
            // Reading through the store writes nothing; a storage writes the value again, as it writes a change.
            #expect(try rotated.read(key: "token") == Data(#""abc""#.utf8))
            #expect(try store(directory, key: old).read(key: "token") == Data(#""abc""#.utf8))
            let storage = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: rotated)
            #expect(storage.wrappedValue == "abc")
            #expect(storage.hasPendingChanges)
            storage.flush()
            #expect(try store(directory).read(key: "token") == Data(#""abc""#.utf8))
            #expect(throws: WLStorageError.self) { try store(directory, key: old).read(key: "token") }
        }
    }

    @Test func aKeyFileReadableByOthersIsRefusedAndAPrivateOneIsRead() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("storage.key")
            try Data(key.base64EncodedSecret.utf8 + [0x0A]).write(to: url)
            chmod(url.path, 0o644)
            let error = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
            #expect(error.code == .invalidConfiguration)
            #expect(error.message.contains("can be read by its group"))
            #expect(error.message.contains("chmod 600"))
            chmod(url.path, 0o604)
            #expect(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
            chmod(url.path, 0o600)
            let read = try WLStorageEncryptionKey(contentsOf: url)
            #expect(read.bytes == key.bytes)
            // Raw bytes work as well as their base64 text; anything else is refused.
            try Data(key.bytes).write(to: url)
            #expect(try WLStorageEncryptionKey(contentsOf: url).bytes == key.bytes)
            try Data("short".utf8).write(to: url)
            #expect(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
        }
    }

    @Test func aKeyFileOwnedByAnotherUserIsRefusedWhateverItsMode() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("storage.key")
            try Data(key.base64EncodedSecret.utf8 + [0x0A]).write(to: url)
            for mode: mode_t in [0o600, 0o400] {
                chmod(url.path, mode)
                #expect(chown(url.path, 65534, 65534) == 0)
                let error = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
                #expect(error.code == .invalidConfiguration)
                #expect(error.path == url.path)
                #expect(error.message.contains("owned by uid 65534"), "\(error.message)")
                #expect(error.message.contains("uid \(geteuid())"), "\(error.message)")
                #expect(!error.description.contains(key.base64EncodedSecret))
            }
            // Given back to the user the program runs as, the same file is read.
            #expect(chown(url.path, geteuid(), getegid()) == 0)
            #expect(try WLStorageEncryptionKey(contentsOf: url).bytes == key.bytes)
        }
    }

    /// A text that is or is not a key, and whether a key file and an environment variable take it.
    struct KeyText: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var bytes: [UInt8]
        /// The key's bytes when the text is a key, `nil` when both sources refuse it.
        var key: [UInt8]?

        static var all: [KeyText] {
            var random = SystemRandomNumberGenerator()
            // Random bytes without a NUL (an environment variable cannot hold one), one of them not printable.
            var raw = (0..<32).map { _ in UInt8.random(in: 1...255, using: &random) }
            raw[0] = 0x01
            let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
            let text = Data(key).base64EncodedString()
            let shortKey = (0..<24).map { _ in UInt8.random(in: 0...255, using: &random) }
            let hex = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
                .map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
                .joined()
            return [
                KeyText(testDescription: "the base64 text of 32 bytes", bytes: Array(text.utf8), key: key),
                KeyText(
                    testDescription: "the base64 text of 32 bytes between white space",
                    bytes: Array(("\n\t  " + text + " \r\n").utf8), key: key),
                KeyText(testDescription: "32 raw bytes", bytes: raw, key: raw),
                KeyText(
                    testDescription: "the base64 text of 24 bytes, 32 characters",
                    bytes: Array(Data(shortKey).base64EncodedString().utf8), key: nil),
                KeyText(testDescription: "the hex text of 16 bytes, 32 characters", bytes: Array(hex.utf8), key: nil),
                KeyText(
                    testDescription: "a passphrase of 32 characters",
                    bytes: Array("correct horse battery staple 12!".utf8), key: nil),
                KeyText(
                    testDescription: "the base64 text of 32 bytes without its padding",
                    bytes: Array(text.dropLast().utf8), key: nil),
                KeyText(testDescription: "31 raw bytes", bytes: Array(raw.dropLast()), key: nil),
            ]
        }
    }

    @Test(arguments: KeyText.all)
    func aKeyFileAndAnEnvironmentVariableTakeTheSameTextsAndRefuseTheSameOnes(text: KeyText) throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("storage.key")
            try Data(text.bytes).write(to: url)
            chmod(url.path, 0o600)
            let name = "WLSTORAGE_TEST_KEY_\(UInt32.random(in: 0...UInt32.max))"
            defer { unsetenv(name) }
            let set = (text.bytes + [0]).withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { setenv(name, $0.baseAddress!, 1) }
            }
            try #require(set == 0)
            if let expected = text.key {
                #expect(try WLStorageEncryptionKey(contentsOf: url).bytes == expected)
                #expect(try WLStorageEncryptionKey(environmentVariable: name).bytes == expected)
            } else {
                let fromFile = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(contentsOf: url) }
                let fromEnvironment = try #require(throws: WLStorageError.self) {
                    try WLStorageEncryptionKey(environmentVariable: name)
                }
                for error in [fromFile, fromEnvironment] {
                    #expect(error.code == .invalidConfiguration)
                    #expect(!error.description.contains(String(decoding: text.bytes, as: UTF8.self)))
                }
                #expect(fromEnvironment.message.contains(name))
                #expect(fromFile.path == url.path)
            }
        }
    }

    @Test func theErrorForAValueOfAnotherKeyNamesTheKeyThatSealedItAndTheStoresKeys() throws {
        try withTemporaryDirectory { directory in
            try store(directory).write(key: "token", data: Data(#""abc""#.utf8))
            let other = try WLStorageEncryptionKey.random()
            let previous = try WLStorageEncryptionKey.random()
            let error = try #require(throws: WLStorageError.self) {
                try store(directory, key: other, previous: [previous]).read(key: "token")
            }
            #expect(error.code == .decodingFailed)
            #expect(error.message.contains("encrypted with another key"))
            #expect(error.message.contains("sealed with key \(key.fingerprintText)"), "\(error.message)")
            #expect(
                error.message.contains("this store has keys \(other.fingerprintText), \(previous.fingerprintText)"),
                "\(error.message)")
            let single = try #require(throws: WLStorageError.self) {
                try store(directory, key: other).read(key: "token")
            }
            #expect(single.message.contains("sealed with key \(key.fingerprintText)"), "\(single.message)")
            #expect(single.message.contains("this store has key \(other.fingerprintText)"), "\(single.message)")
        }
    }

    /// The base64 text of a key file is made by a shell and read by the test only to be masked at once, so that the
    /// only copies of it in the process are those reading the key leaves.
    @Test(
        .enabled(
            if: !isUnderThreadSanitizer,
            "ThreadSanitizer maps terabytes of shadow memory, which a search of the process's memory would read"))
    func noCopyOfAKeyFilesBase64TextIsLeftInTheProcessOnceTheKeyIsRead() throws {
        // The search finds a secret on the heap, and one in the region listed last but the stack (regions are listed
        // by address, the heap among the first), and no longer finds them once they are cleared.
        let heap = UnsafeMutableRawBufferPointer.allocate(byteCount: 43, alignment: 1)
        defer { heap.deallocate() }
        let last = try #require(try ProcessMemory.mapPageAtTheEndOfTheRegionList())
        defer { munmap(last.baseAddress!, last.count) }
        for planted in [heap, last] {
            for index in 0..<43 { planted[index] = UInt8.random(in: 0x41...0x5a) }
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: 43, alignment: 1)
            defer { copy.deallocate() }
            copy.copyMemory(from: UnsafeRawBufferPointer(rebasing: planted[..<43]))
            let plantedSecret = MaskedSecret(maskingInPlace: copy)
            #expect(try plantedSecret.copiesInProcessMemory() >= 1)
            memset(planted.baseAddress!, 0, 43)
            #expect(try plantedSecret.copiesInProcessMemory() == 0)
        }

        try withTemporaryDirectory { directory in
            for round in 0..<3 {
                let url = directory.appendingPathComponent("storage\(round).key")
                let shell = Process()
                shell.executableURL = URL(fileURLWithPath: "/bin/sh")
                shell.arguments = ["-c", "umask 077 && head -c 32 /dev/urandom | base64 > \"$0\"", url.path]
                try shell.run()
                shell.waitUntilExit()
                try #require(shell.terminationStatus == 0)
                // The 43 characters before the padding, read into memory the test clears itself.
                let text = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
                defer { text.deallocate() }
                let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
                try #require(descriptor >= 0)
                let count = read(descriptor, text.baseAddress!, text.count)
                close(descriptor)
                try #require(count == 45)
                memset(text.baseAddress! + 43, 0, text.count - 43)
                let secret = MaskedSecret(maskingInPlace: UnsafeMutableRawBufferPointer(rebasing: text[..<43]))
                #expect(try secret.copiesInProcessMemory() == 0, "before reading key file \(round)")

                let key = try WLStorageEncryptionKey(contentsOf: url)
                #expect(try secret.copiesInProcessMemory() == 0, "after reading key file \(round)")
                withExtendedLifetime(key) {}
            }
        }
    }

    @Test func aKeyInTheEnvironmentIsItsBase64Text() throws {
        setenv("WLSTORAGE_TEST_KEY", key.base64EncodedSecret, 1)
        defer { unsetenv("WLSTORAGE_TEST_KEY") }
        #expect(try WLStorageEncryptionKey(environmentVariable: "WLSTORAGE_TEST_KEY").bytes == key.bytes)
        #expect(throws: WLStorageError.self) { try WLStorageEncryptionKey(environmentVariable: "WLSTORAGE_UNSET_KEY") }
        #expect(!key.description.contains(key.base64EncodedSecret))
        #expect(key.description.hasPrefix("WLStorageEncryptionKey(fingerprint: "))
    }

    @Test func errorsAboutAnEncryptedValueNeverQuoteIt() throws {
        try withTemporaryDirectory { directory in
            // A value that opens but is not the storage's type: the message says so without quoting it.
            try store(directory).write(key: "pin", data: Data(#"{"pin":"9417-secret"}"#.utf8))
            let storage = WLStorage(key: "pin", defaultValue: 0, flushInterval: nil, store: store(directory))
            let error = try #require(storage.lastError)
            #expect(error.code == .storedByAnotherVersion)
            #expect(!error.description.contains("9417"))
            #expect(!error.description.contains("secret"))
        }
    }

    @Test func typeChangesWorkThroughTheEncryption() throws {
        struct Before: Codable { var login: String }
        struct After: Codable, Equatable {
            var user: String
            var scopes: [String]
        }
        try withTemporaryDirectory { directory in
            try store(directory).write(key: "login", data: Data(#"{"login":"ada"}"#.utf8))
            let storage = WLStorage(
                key: "login", defaultValue: After(user: "", scopes: ["read"]), flushInterval: nil,
                store: store(directory), migrations: [.from(Before.self) { After(user: $0.login, scopes: ["read"]) }])
            #expect(storage.wrappedValue == After(user: "ada", scopes: ["read"]))
            storage.flush()
            let stored = try #require(try store(directory).read(key: "login"))
            #expect(try JSONDecoder().decode(After.self, from: stored) == storage.wrappedValue)
            #expect(entries(of: directory) == ["login"])
        }
    }
}
