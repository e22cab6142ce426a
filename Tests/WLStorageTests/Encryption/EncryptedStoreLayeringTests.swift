// Encrypted stores over prefixed, nested and wrapped stores: values stay apart by key and prefix, and sizes hold
// through every layer.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing
import WLStorageCrypto

@testable import WLStorage

@Suite(.capturingOutput)
struct EncryptedStoreLayeringTests: EncryptedDirectorySuite {
    let key = try! WLStorageEncryptionKey.random()

    /// A value just under the maximum size, stored by a storage of a prefixed encrypted store, must read back through
    /// that very store's `read(key:)` (its file is 37 bytes longer than the value).
    @Test func aValueJustUnderTheMaximumSizeReadsBackThroughAPrefixedEncryptedStore() throws {
        try withTemporaryDirectory { directory in
            let limit = WLStorageSystem.maximumValueSize
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
            let limit = WLStorageSystem.maximumValueSize
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
            #expect(eventually(timeout: 30) { storage.wrappedValue == "b" }, "holds \(storage.wrappedValue)")
        }
    }

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
        let nonce = try AESGCM.randomBytes(count: AESGCM.nonceLength)
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

    /// Two cells of one directory and key (one store has a previous key, the other not): each follows the other's
    /// writes, and after sets racing from both, both end on what the file holds.
    @Test func twoEncryptedCellsOfOneDirectoryFollowEachOtherAndConverge() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            let a = WLStorage(key: "v", defaultValue: 0, flushInterval: 0, store: store(directory))
            let b = WLStorage(key: "v", defaultValue: 0, flushInterval: 0, store: store(directory, previous: [old]))
            #expect(a.cell !== b.cell)
            a.wrappedValue = 1
            a.flush()
            #expect(eventually { b.wrappedValue == 1 })
            b.wrappedValue = 2
            b.flush()
            #expect(eventually { a.wrappedValue == 2 })
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                for step in 0..<100 { (index == 0 ? a : b).wrappedValue = 1_000 + step * 2 + index }
            }
            a.flush()
            b.flush()
            var last: Data?
            let converged = eventually(timeout: 30) {
                last = try? store(directory).read(key: "v")
                guard let last, let value = Int(String(decoding: last, as: UTF8.self)) else { return false }
                return a.wrappedValue == value && b.wrappedValue == value && !a.hasPendingChanges
                    && !b.hasPendingChanges
            }
            #expect(
                converged,
                "a: \(a.wrappedValue), b: \(b.wrappedValue), file: \(String(decoding: last ?? Data(), as: UTF8.self))")
        }
    }

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

    /// A value whose JSON is within the maximum value size is written; it must be readable back, although its file is
    /// 37 bytes longer than its JSON.
    @Test func aValueJustUnderTheMaximumSizeIsReadBackFromItsEncryptedFile() throws {
        try withTemporaryDirectory { directory in
            let limit = WLStorageSystem.maximumValueSize
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
}
