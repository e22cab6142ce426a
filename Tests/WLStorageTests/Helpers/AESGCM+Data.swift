import Foundation
import WLStorageCrypto

@testable import WLStorage

extension AESGCM {
    /// Decrypts `ciphertext` held in `Data` (the library opens bytes in place), returning the plaintext only if `tag`
    /// verifies with `additionalData`. Throws ``CipherError/authenticationFailed`` when it does not, another
    /// ``CipherError`` for bad lengths or libcrypto.
    static func open(
        ciphertext: Data, tag: Data, key: [UInt8], nonce: [UInt8], additionalData: Data = Data()
    ) throws -> Data {
        guard nonce.count == nonceLength else { throw CipherError.invalidNonceLength(nonce.count) }
        return try ciphertext.withUnsafeBytes { ciphertext in
            try tag.withUnsafeBytes { tag in
                try nonce.withUnsafeBytes { nonce in
                    try additionalData.withUnsafeBytes { additionalData in
                        try open(
                            ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, additionalData: additionalData,
                            UnsafeRawBufferPointer(start: nil, count: 0))
                    }
                }
            }
        }
    }
}
