import Foundation
import Testing
import WLStorageCrypto
@testable import WLStorage

@Suite(.capturingOutput) struct SealedBoxTests {
    let key = [UInt8](0..<32)
    let olderKey = [UInt8](repeating: 0xa5, count: 32)
    let otherKey = [UInt8]((0..<32).map { 255 - $0 })
    let storageKey = "user/settings"
    let plaintext = Data("secret value".utf8)

    /// Two different keys whose fingerprints are both `8a4c9576`, found by a birthday search over SHA-256 digests of
    /// numbered strings (so that a fingerprint match with the wrong key can be tested without luck).
    let collidingKeys = (
        bytes(hex: "6619092c3e9d08241b23f6e0d90a9080e65c2cd2cee73a6829e10b2588c4805f"),
        bytes(hex: "14c6f5fd2bdeb843e54dbd4b6150c5de660e03983622b6ca17fd3960e0d17fb1")
    )

    func openError(_ sealed: Data, keys: [[UInt8]], associatedKey: String? = nil) -> CipherError? {
        cipherError { _ = try SealedBox.open(sealed, keys: keys, associatedKey: associatedKey ?? storageKey) }
    }

    @Test func aRoundTripRecoversThePlaintextWithTheLayoutDocumented() throws {
        for value in [Data(), plaintext, Data(repeating: 0x42, count: 4096)] {
            let sealed = try SealedBox.seal(value, key: key, associatedKey: storageKey)
            #expect(sealed.count == 4 + 1 + 4 + 12 + value.count + 16)
            #expect(Array(sealed.prefix(4)) == Array("WLSE".utf8))
            #expect(sealed[4] == 1)
            let digest = try #require(key.withUnsafeBytes { SHA256.digest(of: $0) })
            #expect(Array(sealed[5..<9]) == Array(digest.prefix(4)))
            #expect(try SealedBox.fingerprint(of: key) == Array(digest.prefix(4)))
            let opened = try SealedBox.open(sealed, keys: [key], associatedKey: storageKey)
            #expect(opened.plaintext == value)
            #expect(opened.keyIndex == 0)
        }
    }

    @Test func theBoxIsAuthenticatedGCMOverTheHeaderAndTheStorageKey() throws {
        let sealed = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        let header = sealed.prefix(21)
        let opened = try AESGCM.open(
            ciphertext: sealed[21..<(sealed.count - 16)], tag: sealed.suffix(16), key: key,
            nonce: Array(sealed[9..<21]), additionalData: header + Data(storageKey.utf8))
        #expect(opened == plaintext)
    }

    @Test func everySingleBitFlipIsDetected() throws {
        let sealed = try SealedBox.seal(Data("tiny".utf8), key: key, associatedKey: storageKey)
        for bit in 0..<(sealed.count * 8) {
            let byte = bit / 8
            let error = openError(flipping(bit: bit, of: sealed), keys: [key])
            switch byte {
            case 0..<4:
                #expect(error == .notASealedBox, "bit \(bit) of the magic bytes")
            case 4:
                #expect(error == .unsupportedVersion(1 ^ (UInt8(1) << UInt8(bit % 8))), "bit \(bit) of the version")
            case 5..<9:
                #expect(error == .noMatchingKey, "bit \(bit) of the fingerprint")
            default:
                #expect(error == .authenticationFailed, "bit \(bit) of the nonce, ciphertext or tag")
            }
        }
    }

    @Test func aBoxDoesNotOpenUnderAnotherStorageKey() throws {
        let sealed = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        for other in ["user/setting", "user/settings ", "", "User/settings", "other"] {
            #expect(openError(sealed, keys: [key], associatedKey: other) == .authenticationFailed, "\(other)")
        }
    }

    @Test func aWrongKeyFindsNoMatchingKey() throws {
        let sealed = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        #expect(openError(sealed, keys: [otherKey]) == .noMatchingKey)
        #expect(openError(sealed, keys: [otherKey, olderKey]) == .noMatchingKey)
        #expect(openError(sealed, keys: []) == .noMatchingKey)
    }

    @Test func aWrongKeyWithTheSameFingerprintFailsAuthentication() throws {
        let (first, second) = collidingKeys
        #expect(first != second)
        #expect(try SealedBox.fingerprint(of: first) == SealedBox.fingerprint(of: second))
        let sealed = try SealedBox.seal(plaintext, key: second, associatedKey: storageKey)
        #expect(openError(sealed, keys: [first]) == .authenticationFailed)
        let opened = try SealedBox.open(sealed, keys: [otherKey, first, second], associatedKey: storageKey)
        #expect(opened.plaintext == plaintext)
        #expect(opened.keyIndex == 2)
    }

    @Test func anOlderKeyAmongTheKeysOpensTheBoxAndReportsItsIndex() throws {
        let sealedWithOlder = try SealedBox.seal(plaintext, key: olderKey, associatedKey: storageKey)
        let sealedWithCurrent = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        let keys = [key, otherKey, olderKey]
        let older = try SealedBox.open(sealedWithOlder, keys: keys, associatedKey: storageKey)
        #expect(older.plaintext == plaintext)
        #expect(older.keyIndex == 2)
        let current = try SealedBox.open(sealedWithCurrent, keys: keys, associatedKey: storageKey)
        #expect(current.plaintext == plaintext)
        #expect(current.keyIndex == 0)
    }

    @Test func truncationAtEveryLengthFailsAsNotASealedBoxOrAuthentication() throws {
        let sealed = try SealedBox.seal(Data("a truncated value".utf8), key: key, associatedKey: storageKey)
        for length in 0..<sealed.count {
            let error = openError(sealed.prefix(length), keys: [key])
            if length < SealedBox.minimumLength {
                #expect(error == .notASealedBox, "length \(length)")
            } else {
                #expect(error == .authenticationFailed, "length \(length)")
            }
        }
    }

    @Test func bytesThatAreNotABoxOrOfAnotherVersionAreToldApart() throws {
        #expect(openError(Data("{\"json\": true}".utf8), keys: [key]) == .notASealedBox)
        #expect(openError(Data(), keys: [key]) == .notASealedBox)
        var sealed = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        sealed[4] = 2
        #expect(openError(sealed, keys: [key]) == .unsupportedVersion(2))
        #expect(openError(Data("WLSE".utf8) + [2], keys: [key]) == .unsupportedVersion(2))
    }

    @Test func twoSealsOfTheSameValueHaveDifferentNonces() throws {
        let first = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        let second = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        #expect(first.prefix(9) == second.prefix(9))
        #expect(first[9..<21] != second[9..<21])
        #expect(first[21...] != second[21...])
    }

    @Test func aBoxInASliceOfLargerDataOpens() throws {
        let sealed = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        let padded = Data([1, 2, 3]) + sealed + Data([4])
        let opened = try SealedBox.open(padded[3..<(3 + sealed.count)], keys: [key], associatedKey: storageKey)
        #expect(opened.plaintext == plaintext)
    }

    @Test func aKeyOfTheWrongLengthIsRefused() throws {
        let sealed = try SealedBox.seal(plaintext, key: key, associatedKey: storageKey)
        #expect(openError(sealed, keys: [Array(key.prefix(16))]) == .invalidKeyLength(16))
        #expect(
            cipherError { _ = try SealedBox.seal(plaintext, key: [], associatedKey: storageKey) }
                == .invalidKeyLength(0))
    }

    @Test func errorMessagesHoldNoPlaintext() throws {
        let value = "do-not-leak-this-value"
        let sealed = try SealedBox.seal(Data(value.utf8), key: key, associatedKey: storageKey)
        let errors = [
            openError(flipping(bit: 200, of: sealed), keys: [key]),
            openError(sealed, keys: [otherKey]),
            openError(sealed.prefix(10), keys: [key]),
            openError(sealed, keys: [key], associatedKey: "elsewhere"),
        ]
        for error in errors {
            let description = try #require(error).description
            #expect(!description.contains(value))
            #expect(!description.isEmpty)
        }
    }
}
