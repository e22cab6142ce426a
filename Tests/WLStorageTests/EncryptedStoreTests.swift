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
