import Foundation
import WLStorage
import WLStorageCrypto

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The key of `--key-file`, and the files of an encrypted directory opened with it.
///
/// A file is read by the tool as any other (see ``StoredFile``: never past the maximum value size, never through a
/// symlink) and opened by the library's ``WLStorageEncryptedStore``, over a store that holds those bytes only. So the
/// tool opens a value exactly as a program does: the tag is checked against the key and against the storage key the
/// value was stored under.
struct KeyFile {
    /// The path given with `--key-file`.
    var path: String
    /// The key the file holds.
    var key: WLStorageEncryptionKey

    /// The key in the file at `path`, read by the library: the base64 text of 32 bytes, or the 32 bytes themselves
    /// unless they are all text, in a file that the user running the tool owns and that only its owner can read.
    ///
    /// - Throws: ``ToolFailure`` with the library's message when the file is missing or unreadable, when another user
    ///   owns it, when its group or others can read it, or when it holds no key or a text that could be read two
    ///   ways.
    init(path: String) throws(ToolFailure) {
        self.path = path
        do {
            key = try WLStorageEncryptionKey(contentsOf: URL(fileURLWithPath: path))
        } catch let error as WLStorageError {
            // The library's message for a file others can read names the file already.
            var text = error.message
            if let path = error.path, !text.contains(path) { text += ": \(path)" }
            if let code = error.errno { text += " (\(String(cString: strerror(code))))" }
            throw ToolFailure(text)
        } catch {
            throw ToolFailure("the key file cannot be read: \(path): \(error)")
        }
    }

    /// The store of the directory at `path` with its values encrypted under the key, for `set`.
    func store(ofDirectoryAt path: String) -> WLStorageEncryptedStore {
        WLStorageEncryptedStore(.directory(URL(fileURLWithPath: path, isDirectory: true)), key: key)
    }

    /// What the bytes of a file are, opened with the key.
    enum Opened {
        /// The value opened; its plaintext may or may not be JSON.
        case plaintext(Data)
        /// The bytes are not encrypted: they hold JSON, as a directory without encryption keeps it.
        case notEncrypted
        /// The bytes do not open. `reason` says why, and never quotes them.
        case doesNotOpen(reason: String)
    }

    /// Opens `bytes`, the contents of the file at `path`, as the value of the storage key `storageKey`.
    func open(_ bytes: Data, storedUnder storageKey: String, path: String) -> Opened {
        let file = OneFile(key: storageKey, bytes: bytes, identity: "file://" + path)
        let store = WLStorageEncryptedStore(file, key: key)
        do {
            return .plaintext(try store.read(key: storageKey) ?? Data())
        } catch {
            if isNotEncryptedJSON(bytes) { return .notEncrypted }
            return .doesNotOpen(reason: Self.reason(for: error, of: store))
        }
    }

    /// What can be told of `bytes`, the contents of a file named by the hash of its key, without that key: whether
    /// they are JSON that is not encrypted, and otherwise whether they are laid out as an encrypted value (`WLSE`, a
    /// version byte, the key's fingerprint, a nonce of 12 bytes, the ciphertext and a tag of 16 bytes) under this
    /// key's fingerprint. The tag authenticates the storage key too, which the name does not give, so it cannot be
    /// checked.
    ///
    /// - Returns: `nil` when the bytes look like a value encrypted with this key, and what is wrong otherwise.
    func checkWithoutStorageKey(_ bytes: Data) -> Opened? {
        if isNotEncryptedJSON(bytes) { return .notEncrypted }
        guard bytes.count >= 4 + 1 + 4 + 12 + 16, SealedBox.startsAsSealed(bytes) else {
            return .doesNotOpen(reason: "they are not an encrypted value, or they were cut short")
        }
        guard let sealedWith = SealedBox.fingerprint(ofKeyThatSealed: bytes) else {
            return .doesNotOpen(
                reason: "they are in a format this version does not know (\(bytes[bytes.startIndex + 4]))")
        }
        if sealedWith != key.fingerprint {
            return .doesNotOpen(
                reason: "they were encrypted with another key than the key file's (sealed with key"
                    + " \(SHA256.hex(sealedWith)); the key file has key \(key.fingerprintText))")
        }
        return nil
    }

    /// Whether `bytes` are JSON, and not an encrypted value.
    private func isNotEncryptedJSON(_ bytes: Data) -> Bool {
        !SealedBox.startsAsSealed(bytes) && JSONText.problem(in: bytes) == nil
    }

    /// Why a value does not open: the library's reason, without the store's name and the words around it.
    private static func reason(for error: any Error, of store: WLStorageEncryptedStore) -> String {
        guard let error = error as? WLStorageError else { return "\(error)" }
        var text = error.message
        if text.hasPrefix(store.identity + ": ") { text.removeFirst(store.identity.count + 2) }
        if let range = text.range(of: "cannot be decrypted: ") { text = String(text[range.upperBound...]) }
        if let range = text.range(of: "; they are left as they are") { text.removeSubrange(range) }
        // The store is the key file's: "this store has key 1a2b3c4d" is the key given.
        return text.replacingOccurrences(of: "this store", with: "the key file")
    }
}

/// A store that holds the bytes of one file, read by the tool, for a ``WLStorageEncryptedStore`` to open. It is never
/// written to: an encrypted store writes on a read only to store again a value opened with an earlier key, and the
/// tool gives it none.
private struct OneFile: WLStorageStore {
    var key: String
    var bytes: Data
    var identity: String

    func read(key: String) throws -> Data? {
        key == self.key ? bytes : nil
    }

    func write(key: String, data: Data) throws {
        throw WLStorageError(code: .writeFailed, message: "\(identity): the tool only reads this file")
    }

    func remove(key: String) throws {
        throw WLStorageError(code: .writeFailed, message: "\(identity): the tool only reads this file")
    }

    func keys() throws -> [String] {
        [key]
    }
}
