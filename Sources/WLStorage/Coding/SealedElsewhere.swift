import Foundation
import WLStorageCrypto

/// Bytes an encrypted store sealed, found by a storage without its key: unknown to it, never moved aside or replaced.
enum SealedElsewhere {
    /// The error for `data` when it is a sealed value; `nil` otherwise.
    static func error(_ data: Data, key: String, path: String?) -> WLStorageError? {
        guard let fingerprint = SealedBox.fingerprint(ofKeyThatSealed: data) else { return nil }
        return WLStorageError(
            code: .decodingFailed,
            message: "what is stored is a value sealed by an encrypted store, with key \(SHA256.hex(fingerprint)), and"
                + " this storage has no key: it is left as it is, and nothing is written over it until it is removed"
                + " (give the storage the key with `.encrypted(with:)`)",
            key: key, path: path)
    }
}
