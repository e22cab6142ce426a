import Foundation
import Testing
import WLStorageCrypto

@testable import WLStorage

/// One AES-256-GCM known-answer vector, in hex as the NIST response file gives it.
struct GCMVector: Sendable, CustomTestStringConvertible {
    let name: String
    let key: String
    let iv: String
    let plaintext: String
    let aad: String
    let ciphertext: String
    let tag: String

    var testDescription: String { name }
}

/// Vectors copied exactly from NIST's GCM test vectors (CAVS 14.0, the file gcmEncryptExtIV256.rsp of the
/// "GCM Test Vectors (SP 800-38D)" set), as shipped in the PyPI package cryptography_vectors 50.0.2 at
/// vectors/cryptography_vectors/ciphers/AES/GCM/gcmEncryptExtIV256.rsp. Each name gives the section and count. Each
/// was also checked against the Python cryptography library's AES-GCM.
let gcmEncryptExtIV256Vectors: [GCMVector] = [
    GCMVector(
        name: "[Keylen = 256] [IVlen = 96] [PTlen = 0] [AADlen = 0] [Taglen = 128], Count = 0",
        key: "b52c505a37d78eda5dd34f20c22540ea1b58963cf8e5bf8ffa85f9f2492505b4",
        iv: "516c33929df5a3284ff463d7",
        plaintext: "",
        aad: "",
        ciphertext: "",
        tag: "bdc1ac884d332457a1d2664f168c76f0"
    ),
    GCMVector(
        name: "[Keylen = 256] [IVlen = 96] [PTlen = 0] [AADlen = 128] [Taglen = 128], Count = 0",
        key: "78dc4e0aaf52d935c3c01eea57428f00ca1fd475f5da86a49c8dd73d68c8e223",
        iv: "d79cf22d504cc793c3fb6c8a",
        plaintext: "",
        aad: "b96baa8c1c75a671bfb2d08d06be5f36",
        ciphertext: "",
        tag: "3e5d486aa2e30b22e040b85723a06e76"
    ),
    GCMVector(
        name: "[Keylen = 256] [IVlen = 96] [PTlen = 128] [AADlen = 0] [Taglen = 128], Count = 0",
        key: "31bdadd96698c204aa9ce1448ea94ae1fb4a9a0b3c9d773b51bb1822666b8f22",
        iv: "0d18e06c7c725ac9e362e1ce",
        plaintext: "2db5168e932556f8089a0622981d017d",
        aad: "",
        ciphertext: "fa4362189661d163fcd6a56d8bf0405a",
        tag: "d636ac1bbedd5cc3ee727dc2ab4a9489"
    ),
    GCMVector(
        name: "[Keylen = 256] [IVlen = 96] [PTlen = 128] [AADlen = 128] [Taglen = 128], Count = 0",
        key: "92e11dcdaa866f5ce790fd24501f92509aacf4cb8b1339d50c9c1240935dd08b",
        iv: "ac93a1a6145299bde902f21a",
        plaintext: "2d71bcfa914e4ac045b2aa60955fad24",
        aad: "1e0889016f67601c8ebea4943bc23ad6",
        ciphertext: "8995ae2e6df3dbf96fac7b7137bae67f",
        tag: "eca5aa77d51d4a0a14d9c51e1da474ab"
    ),
    GCMVector(
        name: "[Keylen = 256] [IVlen = 96] [PTlen = 408] [AADlen = 160] [Taglen = 128], Count = 0",
        key: "24501ad384e473963d476edcfe08205237acfd49b5b8f33857f8114e863fec7f",
        iv: "9ff18563b978ec281b3f2794",
        plaintext:
            "27f348f9cdc0c5bd5e66b1ccb63ad920ff2219d14e8d631b3872265cf117ee86757accb158bd9abb3868fdc0d0b074b5f01b2c",
        aad: "adb5ec720ccf9898500028bf34afccbcaca126ef",
        ciphertext:
            "eb7cb754c824e8d96f7c6d9b76c7d26fb874ffbf1d65c6f64a698d839b0b06145dae82057ad55994cf59ad7f67c0fa5e85fab8",
        tag: "bc95c532fecc594c36d1550286a7a3f0"
    ),
    GCMVector(
        name: "[Keylen = 256] [IVlen = 96] [PTlen = 104] [AADlen = 720] [Taglen = 128], Count = 0",
        key: "ff9506b4d46ba54128876fadfcc673a4c927c618ea7d95cfcaa508cbc8f7fc66",
        iv: "3742ad2208a0484345eee1be",
        plaintext: "7fd0d6cadc92cad27bb2d7d8c8",
        aad: "f1360a27fdc244be8739d85af6491c762a693aafe668c449515fdeeedb6a90aeee3891bbc8b69adc6a6426cb12fcdebc32"
            + "c9f58c5259d128b91efa28620a3a9a0168b0ff5e76951cb41647ba4aa1f87fac0d97ac580e42cffc7e",
        ciphertext: "bdb8346b28eb4d7226493611a6",
        tag: "7484d827b767647f44c7f94a39f8175c"
    ),
]

/// The bytes that `hex`, an even number of hex digits, spells.
func bytes(hex: String) -> [UInt8] {
    let digits = Array(hex.utf8)
    precondition(digits.count.isMultiple(of: 2))
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
    }
}

/// `data` with bit `bit` (0 is the lowest bit of the first byte) inverted.
func flipping(bit: Int, of data: Data) -> Data {
    var copy = data
    copy[copy.startIndex + bit / 8] ^= UInt8(1) << UInt8(bit % 8)
    return copy
}

/// The ``CipherError`` that `body` throws, or `nil` when it throws none or another error.
func cipherError(_ body: () throws -> Void) -> CipherError? {
    do {
        try body()
        return nil
    } catch let error as CipherError {
        return error
    } catch {
        return nil
    }
}

@Suite(.capturingOutput) struct AESGCMTests {
    let key = [UInt8](0..<32)
    let nonce = [UInt8](100..<112)

    @Test func aRoundTripRecoversThePlaintextAndTheCiphertextIsAsLongAsIt() throws {
        for length in [0, 1, 15, 16, 17, 1000] {
            let plaintext = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let aad = Data("storage key".utf8)
            let (ciphertext, tag) = try AESGCM.seal(plaintext, key: key, nonce: nonce, additionalData: aad)
            #expect(ciphertext.count == length)
            #expect(tag.count == 16)
            if length >= 16 { #expect(ciphertext != plaintext) }
            let opened = try AESGCM.open(
                ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, additionalData: aad)
            #expect(opened == plaintext)
        }
    }

    @Test func slicesOfLargerDataAreReadFromTheirOwnStart() throws {
        let whole = Data("xxxxplaintext bytesyyyy".utf8)
        let slice = whole[4..<19]
        let aadWhole = Data("--aad--".utf8)
        let (ciphertext, tag) = try AESGCM.seal(slice, key: key, nonce: nonce, additionalData: aadWhole[2..<5])
        let padded = Data([9, 9]) + ciphertext + tag
        let opened = try AESGCM.open(
            ciphertext: padded[2..<(2 + ciphertext.count)], tag: padded[(2 + ciphertext.count)...], key: key,
            nonce: nonce, additionalData: Data("aad".utf8))
        #expect(opened == Data("plaintext bytes".utf8))
    }

    @Test func keysNoncesAndTagsOfTheWrongLengthAreRefused() {
        let plaintext = Data("value".utf8)
        #expect(
            cipherError { _ = try AESGCM.seal(plaintext, key: Array(key.prefix(31)), nonce: nonce) }
                == .invalidKeyLength(31))
        #expect(cipherError { _ = try AESGCM.seal(plaintext, key: key + [0], nonce: nonce) } == .invalidKeyLength(33))
        #expect(
            cipherError { _ = try AESGCM.seal(plaintext, key: key, nonce: Array(nonce.prefix(11))) }
                == .invalidNonceLength(11))
        #expect(cipherError { _ = try AESGCM.seal(plaintext, key: key, nonce: nonce + [0]) } == .invalidNonceLength(13))
        let shortTag = cipherError {
            _ = try AESGCM.open(ciphertext: plaintext, tag: Data(count: 15), key: key, nonce: nonce)
        }
        #expect(shortTag == .invalidTagLength(15))
    }

    @Test func randomNoncesAndKeysHaveTheirLengthsAndDiffer() throws {
        let first = try AESGCM.randomBytes(count: AESGCM.nonceLength)
        let second = try AESGCM.randomBytes(count: AESGCM.nonceLength)
        #expect(first.count == 12)
        #expect(second.count == 12)
        #expect(first != second)
        let firstKey = try AESGCM.randomBytes(count: AESGCM.keyLength)
        #expect(firstKey.count == 32)
        #expect(try AESGCM.randomBytes(count: AESGCM.keyLength) != firstKey)
    }
}
