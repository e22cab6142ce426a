import Foundation
import Testing
import WLStorageCrypto
@testable import WLStorage

@Suite(.capturingOutput) struct AESGCMKnownAnswerTests {
    @Test(arguments: gcmEncryptExtIV256Vectors)
    func sealGivesTheKnownCiphertextAndTag(vector: GCMVector) throws {
        let sealed = try AESGCM.seal(
            Data(bytes(hex: vector.plaintext)), key: bytes(hex: vector.key), nonce: bytes(hex: vector.iv),
            additionalData: Data(bytes(hex: vector.aad)))
        #expect(Array(sealed.ciphertext) == bytes(hex: vector.ciphertext))
        #expect(Array(sealed.tag) == bytes(hex: vector.tag))
    }

    @Test(arguments: gcmEncryptExtIV256Vectors)
    func openRecoversTheKnownPlaintext(vector: GCMVector) throws {
        let plaintext = try AESGCM.open(
            ciphertext: Data(bytes(hex: vector.ciphertext)), tag: Data(bytes(hex: vector.tag)),
            key: bytes(hex: vector.key), nonce: bytes(hex: vector.iv), additionalData: Data(bytes(hex: vector.aad)))
        #expect(Array(plaintext) == bytes(hex: vector.plaintext))
    }

    @Test(arguments: gcmEncryptExtIV256Vectors)
    func openRefusesAWrongTagCiphertextNonceAdditionalDataOrKey(vector: GCMVector) {
        let key = bytes(hex: vector.key)
        let nonce = bytes(hex: vector.iv)
        let ciphertext = Data(bytes(hex: vector.ciphertext))
        let tag = Data(bytes(hex: vector.tag))
        let aad = Data(bytes(hex: vector.aad))
        func openError(
            ciphertext: Data, tag: Data, key: [UInt8], nonce: [UInt8], additionalData: Data
        ) -> CipherError? {
            cipherError {
                _ = try AESGCM.open(
                    ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, additionalData: additionalData)
            }
        }
        for bit in 0..<(tag.count * 8) {
            let error = openError(
                ciphertext: ciphertext, tag: flipping(bit: bit, of: tag), key: key, nonce: nonce, additionalData: aad)
            #expect(error == .authenticationFailed, "tag bit \(bit)")
        }
        if !ciphertext.isEmpty {
            let error = openError(
                ciphertext: flipping(bit: 0, of: ciphertext), tag: tag, key: key, nonce: nonce, additionalData: aad)
            #expect(error == .authenticationFailed)
        }
        var otherNonce = nonce
        otherNonce[0] ^= 1
        #expect(
            openError(ciphertext: ciphertext, tag: tag, key: key, nonce: otherNonce, additionalData: aad)
                == .authenticationFailed)
        #expect(
            openError(ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, additionalData: aad + [0])
                == .authenticationFailed)
        var otherKey = key
        otherKey[31] ^= 0x80
        #expect(
            openError(ciphertext: ciphertext, tag: tag, key: otherKey, nonce: nonce, additionalData: aad)
                == .authenticationFailed)
    }
}
