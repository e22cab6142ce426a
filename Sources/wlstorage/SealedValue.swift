import Foundation
import WLStorage
import WLStorageCrypto
import WLStorageFiles

/// What the tool tells of a value sealed by ``WLStorageEncryptedStore`` when it has no key to open it: that it is
/// sealed, and with which key, by the fingerprint its header carries.
///
/// Such bytes start with `WLSE`, which no JSON does. Without `--key-file` they are never read as a broken JSON file,
/// nor replaced or removed: a plain `set` over them would destroy a secret that only its key can tell apart.
enum SealedValue {
    /// How many bytes of a file tell whether it is sealed, and with which key: the magic, the version, the fingerprint.
    static let headerLength = 9

    /// `sealed with key 1a2b3c4d` when `bytes` start as a sealed value, `nil` otherwise.
    static func description(of bytes: some Collection<UInt8>) -> String? {
        guard SealedBox.startsAsSealed(bytes) else { return nil }
        guard let fingerprint = SealedBox.fingerprint(ofKeyThatSealed: bytes) else {
            return
                "sealed with a key its header does not name (it is cut short, or of a format this tool does not know)"
        }
        return "sealed with key \(SHA256.hex(fingerprint))"
    }

    /// The description of the file `name` in `directory` when it holds a sealed value, from its first bytes; `nil`
    /// when it does not, when there is no such file, or when it is not a regular file (which the library neither
    /// follows nor replaces).
    ///
    /// - Throws: As ``StoredFile/prefix(_:in:count:)``.
    static func description(ofFile name: [UInt8], in directory: StorageDirectory) throws(WLStorageError) -> String? {
        try StoredFile.prefix(name, in: directory, count: headerLength).flatMap { description(of: $0) }
    }
}
