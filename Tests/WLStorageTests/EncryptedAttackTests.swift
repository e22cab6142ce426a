// Attacks on the encrypted store (WLStorageEncryptedStore), its cipher, key loading and the tool's --key-file.
// Tests that fail expose a fault; the others cover hard cases that hold.
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// The UTF-8 bytes of `text`.
private func json(_ text: String) -> Data { Data(text.utf8) }

@Suite(.capturingOutput)
struct EncryptedAttackTests {
    private let key = try! WLStorageEncryptionKey.random()

    private func store(_ directory: URL, key: WLStorageEncryptionKey? = nil, previous: [WLStorageEncryptionKey] = [])
        -> WLStorageEncryptedStore
    {
        WLStorageEncryptedStore(.directory(directory), key: key ?? self.key, previousKeys: previous)
    }

    private func file(_ name: String, in directory: URL) -> Data? {
        FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
    }

    // MARK: Encryption over a prefixed store

    /// Two prefixes of one directory under one key are two sets of keys: a storage of "x" under "a." and one of "x"
    /// under "b." are two values, in two files.
    @Test func encryptedPrefixedStoresOfTwoPrefixesDoNotShareAValue() throws {
        try withTemporaryDirectory { directory in
            let a = WLStorage(
                key: "x", defaultValue: "", flushInterval: nil,
                store: WLStorageDirectoryStore.directory(directory).prefixed("a.").encrypted(with: key))
            let b = WLStorage(
                key: "x", defaultValue: "", flushInterval: nil,
                store: WLStorageDirectoryStore.directory(directory).prefixed("b.").encrypted(with: key))
            a.wrappedValue = "alpha-secret"
            b.wrappedValue = "beta-secret"
            a.flush()
            b.flush()
            #expect(a.wrappedValue == "alpha-secret")
            #expect(b.wrappedValue == "beta-secret")
            let storeA = WLStorageDirectoryStore.directory(directory).prefixed("a.").encrypted(with: key)
            let storeB = WLStorageDirectoryStore.directory(directory).prefixed("b.").encrypted(with: key)
            let readA = try storeA.read(key: "x")
            let readB = try storeB.read(key: "x")
            #expect(readA == json(#""alpha-secret""#))
            #expect(readB == json(#""beta-secret""#))
        }
    }

    /// The bytes of "a.x" copied over "b.x" in the directory must not open as the value of "b.x".
    @Test func encryptedPrefixedStoreRefusesTheBytesOfAnotherPrefixedKey() throws {
        try withTemporaryDirectory { directory in
            let storeA = WLStorageDirectoryStore.directory(directory).prefixed("a.").encrypted(with: key)
            let storeB = WLStorageDirectoryStore.directory(directory).prefixed("b.").encrypted(with: key)
            try storeA.write(key: "admin", data: json("true"))
            try storeB.write(key: "admin", data: json("false"))
            try #require(file("a.admin", in: directory)).write(to: directory.appendingPathComponent("b.admin"))
            #expect(throws: WLStorageError.self) { try storeB.read(key: "admin") }
        }
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

    // MARK: Sizes

    /// A value whose JSON is within the maximum value size is written; it must be readable back, although its file is
    /// 37 bytes longer than its JSON.
    @Test func aValueJustUnderTheMaximumSizeIsReadBackFromItsEncryptedFile() throws {
        try withTemporaryDirectory { directory in
            let limit = WLStorage<Never>.maximumValueSize
            let big = String(repeating: "s", count: limit - 12)  // JSON: limit - 10 bytes
            do {
                let storage = WLStorage(key: "big", defaultValue: "", flushInterval: nil, store: store(directory))
                storage.wrappedValue = big
                storage.flush()
                // Written (a check of the file may already report it too large: not asserted, it is timing).
                #expect(!storage.hasPendingChanges)
            }
            let size = try #require(file("big", in: directory)).count
            #expect(size == limit - 10 + 37)
            var readBack: Data?
            #expect(throws: Never.self) { readBack = try store(directory).read(key: "big") }
            #expect(readBack?.count == limit - 10)
            let again = WLStorage(key: "big", defaultValue: "", flushInterval: nil, store: store(directory))
            #expect(again.lastError == nil)
            #expect(again.wrappedValue.count == big.count)
        }
    }

    // MARK: Key loading

    /// An environment variable holds the base64 text of the key: 32 characters that are not base64 are no key.
    @Test func anEnvironmentVariableOf32CharactersThatAreNotBase64IsRefused() throws {
        let name = "WLSTORAGE_ATTACK_KEY_\(UInt32.random(in: 0...UInt32.max))"
        defer { unsetenv(name) }
        // `openssl rand -hex 16`: 32 characters, 16 bytes of entropy, not the base64 text of a 32-byte key.
        setenv(name, "00112233445566778899aabbccddeeff", 1)
        let error = try #require(throws: WLStorageError.self) { try WLStorageEncryptionKey(environmentVariable: name) }
        #expect(error.code == .invalidConfiguration)
    }

    @Test func malformedEnvironmentVariablesAreRefusedWithClearErrors() throws {
        let name = "WLSTORAGE_ATTACK_KEY_\(UInt32.random(in: 0...UInt32.max))"
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

    // MARK: Values that do not open are kept

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
            WLStorage<Never>.flushAll()
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

    /// A rotated store's storage writes a value of an earlier key again under the current one, as a rewrite; a
    /// value that another program (still on the earlier key) stores before that write must not be replaced by it.
    @Test func resealingUnderTheCurrentKeyDoesNotReplaceAValueStoredMeanwhile() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            let oldStore = store(directory, key: old)
            try oldStore.write(key: "token", data: json(#""first""#))
            let rotated = WLStorageEncryptedStore(.directory(directory), key: key, previousKeys: [old])
            let storage = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: rotated)
            #expect(storage.wrappedValue == "first")
            #expect(storage.hasPendingChanges)
            try oldStore.write(key: "token", data: json(#""stored-meanwhile""#))
            #expect(eventually { storage.wrappedValue == "stored-meanwhile" })
            storage.flush()
            let now = try store(directory, previous: [old]).read(key: "token")
            #expect(now == json(#""stored-meanwhile""#))
        }
    }

    // MARK: Kept copies

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

    // MARK: Processes

    private func childEnvironment(
        key: WLStorageEncryptionKey, previous: WLStorageEncryptionKey? = nil, action: String
    ) -> [String: String] {
        var environment = ["WLSTORAGE_TEST_ENC_KEY": key.base64EncodedSecret, "WLSTORAGE_TEST_ENC_ACTION": action]
        environment["WLSTORAGE_TEST_ENC_PREVIOUS"] = previous?.base64EncodedSecret
        return environment
    }

    /// exit(0) with a pending change of an encrypted storage: written, and decryptable.
    @Test(arguments: ["exit", "plain-first-exit"])
    func aPendingEncryptedChangeIsWrittenWhenTheProgramExits(action: String) throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess(
                "WLStorageTestChild", ["encrypted", directory.path, "token", "exit-secret"],
                environment: childEnvironment(key: key, action: action))
            #expect(child.waitFor("ready"))
            let ended = try #require(child.waitForExit())
            #expect(ended.reason == .exit && ended.status == 0)
            #expect(try store(directory).read(key: "token") == json(#""exit-secret""#))
        }
    }

    /// SIGTERM with a pending change of an encrypted storage: written, and decryptable.
    @Test func aPendingEncryptedChangeIsWrittenOnSIGTERM() throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess(
                "WLStorageTestChild", ["encrypted", directory.path, "token", "term-secret"],
                environment: childEnvironment(key: key, action: "wait"))
            #expect(child.waitFor("ready"))
            child.send(SIGTERM)
            let ended = try #require(child.waitForExit())
            #expect(ended.reason == .uncaughtSignal && ended.status == SIGTERM)
            #expect(try store(directory).read(key: "token") == json(#""term-secret""#))
        }
    }

    /// Two programs in the middle of a rotation, one with `key: old, previousKeys: [new]` and one with
    /// `key: new, previousKeys: [old]`, as the documentation's two steps leave them while they are deployed: the file
    /// must settle, not be rewritten by each in turn forever.
    @Test func twoProgramsWithOppositeKeyOrdersDoNotRewriteTheValueForever() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            let new = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""rotating""#))
            let child = try ChildProcess(
                "WLStorageTestChild", ["encrypted", directory.path, "token"],
                environment: childEnvironment(key: old, previous: new, action: "hold"))
            defer {
                child.send(SIGKILL)
                _ = child.waitForExit()
            }
            #expect(child.waitFor("ready"))
            #expect(child.lines.contains("value rotating"))
            let storage = WLStorage(
                key: "token", defaultValue: "", flushInterval: nil, store: store(directory, key: new, previous: [old]))
            #expect(storage.wrappedValue == "rotating")
            let url = directory.appendingPathComponent("token")
            var last = FileManager.default.contents(atPath: url.path)
            var stablePolls = 0
            var changes = 0
            // Settled: unchanged over 100 polls in a row (about a second).
            let settled = eventually(timeout: 20) {
                let now = FileManager.default.contents(atPath: url.path)
                if now == last {
                    stablePolls += 1
                } else {
                    stablePolls = 0
                    changes += 1
                    last = now
                }
                return stablePolls >= 100
            }
            #expect(settled, "the file was rewritten \(changes) times and did not settle")
        }
    }

    // MARK: Threads

    @Test func manyThreadsSetGetAndUpdateAnEncryptedStorage() throws {
        try withTemporaryDirectory { directory in
            let storage = WLStorage(key: "count", defaultValue: 0, flushInterval: 0, store: store(directory))
            let threads = 8
            let rounds = 300
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for round in 0..<rounds {
                    storage.update { $0 += 1 }
                    _ = storage.wrappedValue
                    if round % 50 == 0 { storage.flush() }
                }
            }
            #expect(storage.wrappedValue == threads * rounds)
            storage.flush()
            let stored = try store(directory).read(key: "count")
            #expect(stored == json("\(threads * rounds)"))
            #expect(storage.lastError == nil)
        }
    }

    /// Storages of encrypted stores released from inside their own change handlers, and in every order.
    @Test func encryptedStoragesReleasedInsideTheirOwnHandlersAndInAnyOrderWriteTheirValues() throws {
        try withTemporaryDirectory { directory in
            // Released from inside its own handler, with a change pending.
            let box = Mutex<WLStorage<String>?>(
                WLStorage(key: "self", defaultValue: "", flushInterval: 3_600, store: store(directory)))
            let released = Atomic<Bool>(false)
            let subscription = box.withLock { $0! }.onChange(queue: .global()) { value in
                guard value == "last" else { return }
                let storage = box.withLock { storage -> WLStorage<String>? in
                    defer { storage = nil }
                    return storage
                }
                _ = storage  // the last reference goes here, inside the handler
                released.store(true, ordering: .sequentiallyConsistent)
            }
            box.withLock { $0! }.wrappedValue = "first"
            box.withLock { $0! }.flush()
            box.withLock { $0! }.wrappedValue = "last"
            #expect(eventually { released.load(ordering: .sequentiallyConsistent) })
            #expect(eventually { (try? store(directory).read(key: "self")) == json(#""last""#) })
            subscription.cancel()

            // Three storages of one key and one store, released in every order, with a change pending.
            let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
            for (index, order) in orders.enumerated() {
                var storages: [WLStorage<Int>?] = (0..<3).map { _ in
                    WLStorage(key: "order", defaultValue: 0, flushInterval: 3_600, store: store(directory))
                }
                storages[order[0]]!.wrappedValue = index * 10 + 1
                storages[order[1]]!.update { $0 += 1 }
                for position in order { storages[position] = nil }
                #expect(
                    eventually { (try? store(directory).read(key: "order")) == json("\(index * 10 + 2)") },
                    "order \(order)")
            }
        }
    }

    // MARK: The tool

    private func keyFile(in directory: URL, _ key: WLStorageEncryptionKey, named name: String = "storage.key") throws
        -> URL
    {
        let url = directory.appendingPathComponent(name)
        try Data((key.base64EncodedSecret + "\n").utf8).write(to: url)
        chmod(url.path, 0o600)
        return url
    }

    private func tool(_ arguments: [String]) throws -> (status: Int32, signaled: Bool, out: String, err: String) {
        let child = try ChildProcess("wlstorage", arguments, unsetting: ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME"])
        let ended = try #require(child.waitForExit())
        return (ended.status, ended.reason == .uncaughtSignal, child.printed, child.printedErrors)
    }

    /// A value that opens but is not JSON (stored by a program through the store directly): the tool says so, and
    /// prints none of its bytes.
    @Test func theToolQuotesNoByteOfAValueThatOpensButIsNotJSON() throws {
        try withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("store")
            let keyURL = try keyFile(in: root, key)
            try store(directory).write(key: "api", data: Data("Zq7-hunter2".utf8))
            let get = try tool(["--dir", directory.path, "--key-file", keyURL.path, "get", "api"])
            #expect(get.status == 1)
            #expect(get.out.isEmpty)
            #expect(!get.err.contains("'Z'"), "\(get.err)")
            let verify = try tool(["--dir", directory.path, "--key-file", keyURL.path, "verify"])
            #expect(verify.status == 1)
            #expect(!verify.out.contains("'Z'") && !verify.err.contains("'Z'"), "\(verify.out)")
        }
    }

    @Test func theToolRefusesBadKeyFilesClearlyAndWrongKeysWithoutPrintingValues() throws {
        try withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("store")
            try store(directory).write(key: "api", data: json(#""hunter2-secret""#))
            let before = try #require(file("api", in: directory))
            // A directory as key file, an empty key file, a key file others can read, a symlink to it.
            let folder = root.appendingPathComponent("keydir")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            chmod(folder.path, 0o700)
            let empty = root.appendingPathComponent("empty.key")
            try Data().write(to: empty)
            chmod(empty.path, 0o600)
            let shared = try keyFile(in: root, key, named: "shared.key")
            chmod(shared.path, 0o640)
            let link = root.appendingPathComponent("link.key")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: shared)
            for bad in [folder, empty, shared, link] {
                for command in [["get", "api"], ["set", "api", "1"], ["list"], ["verify"]] {
                    let run = try tool(["--dir", directory.path, "--key-file", bad.path] + command)
                    #expect(run.status != 0 && !run.signaled, "\(bad.lastPathComponent) \(command)")
                    #expect(run.err.contains("key file") || run.err.contains("no key"), "\(run.err)")
                    #expect(!run.out.contains("hunter2") && !run.err.contains("hunter2"))
                }
            }
            #expect(file("api", in: directory) == before)
            // A wrong key: get, list and verify fail or flag the file, naming it, printing nothing of the value.
            let wrong = try keyFile(in: root, try .random(), named: "wrong.key")
            let get = try tool(["--dir", directory.path, "--key-file", wrong.path, "get", "api"])
            #expect(get.status == 1)
            #expect(get.err.contains(directory.appendingPathComponent("api").path))
            let verify = try tool(["--dir", directory.path, "--key-file", wrong.path, "verify"])
            #expect(verify.status == 1)
            #expect(verify.out.contains("api"))
            let list = try tool(["--dir", directory.path, "--key-file", wrong.path, "list"])
            for run in [get, verify, list] {
                #expect(!run.out.contains("hunter2") && !run.err.contains("hunter2"))
            }
            #expect(file("api", in: directory) == before)
            // A set with the wrong key does not replace a value it cannot open: the value would be lost for good.
            let set = try tool(["--dir", directory.path, "--key-file", wrong.path, "set", "api", #""other""#])
            #expect(set.status == 1)
            #expect(set.err.contains("does not open") && set.err.contains("rm"), "\(set.err)")
            #expect(file("api", in: directory) == before)
            // Once removed, a value can be stored under the other key.
            #expect(try tool(["--dir", directory.path, "--key-file", wrong.path, "rm", "api"]).status == 0)
            #expect(try tool(["--dir", directory.path, "--key-file", wrong.path, "set", "api", "1"]).status == 0)
            #expect(file("api", in: directory) != nil)
        }
    }
}
