import Foundation
import WLStorageCrypto

/// A 256-bit key of a ``WLStorageEncryptedStore``. Its ``description`` names it by a fingerprint, never its bytes.
///
/// A key file or an environment variable holds the base64 text of the 32 bytes (as `openssl rand -base64 32` prints) or
/// the 32 bytes themselves; anything else, or 32 printable bytes, is refused
/// (``WLStorageError/Code/invalidConfiguration``).
///
/// - Important: Cleared: a key file's read buffer once decoded, and a failed decoding's buffer. Not cleared: the key's
///   32 bytes in its array, an environment variable's text, and ``base64EncodedSecret``'s strings.
public struct WLStorageEncryptionKey: Sendable, CustomStringConvertible {
    let bytes: [UInt8]
    /// The first four bytes of the key's SHA-256, as sealed values carry them.
    package let fingerprint: [UInt8]

    /// A key of these 32 bytes.
    ///
    /// - Throws: ``WLStorageError`` with the code ``WLStorageError/Code/invalidConfiguration`` when there are not 32.
    public init(bytes: some Collection<UInt8>) throws {
        let bytes = Array(bytes)
        guard bytes.count == AESGCM.keyLength else {
            throw WLStorageError(
                code: .invalidConfiguration,
                message: "an encryption key is \(AESGCM.keyLength) bytes, not \(bytes.count)")
        }
        self.bytes = bytes
        do {
            self.fingerprint = try SealedBox.fingerprint(of: bytes)
        } catch {
            throw WLStorageError(
                code: .invalidConfiguration, message: "the key's fingerprint could not be made: \(error)",
                underlying: error)
        }
    }

    /// The key in the file at `url`, in the forms above. The file must be a regular file owned by the effective user
    /// (root too, as ssh checks), readable and writable by that user only.
    ///
    /// - Throws: ``WLStorageError/Code/invalidConfiguration`` when the file is owned by another user, readable by group
    ///   or others (use 0600 or 0400), unreadable, or holds no key or an ambiguous text.
    public init(contentsOf url: URL) throws {
        let path = url.path
        let bytes = try Self.withContents(ofKeyFile: path) { contents in
            do {
                return try Self.decode(contents)
            } catch var error as WLStorageError {
                error.path = path
                throw error
            }
        }
        try self.init(bytes: bytes)
    }

    /// Calls `body` with the key file's bytes, cleared when it returns. Type, owner and mode are checked on the open
    /// descriptor, so what is checked is what is read (`O_NONBLOCK`: a FIFO does not block).
    private static func withContents<R>(
        ofKeyFile path: String, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        func failure(_ message: String, errno code: Int32? = nil) -> WLStorageError {
            WLStorageError(code: .invalidConfiguration, message: message, path: path, errno: code)
        }
        var descriptor: Int32
        repeat {
            descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else { throw failure("the key file cannot be read", errno: errno) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw failure("the key file cannot be read", errno: errno) }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw failure(
                "the key file is not a regular file" + (status.st_mode & S_IFMT == S_IFDIR ? " but a directory" : ""))
        }
        let user = geteuid()
        guard status.st_uid == user else {
            throw failure(
                "the key file is owned by uid \(status.st_uid), not by the user reading it (uid \(user)); another"
                    + " user could have written or replaced it: a key file must be owned by the user that reads it"
                    + " (chown \(user) \(path))")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw failure(
                "the key file can be read by " + (mode & 0o070 != 0 ? "its group" : "others")
                    + " (mode \(String(mode, radix: 8))); make it readable by its owner only: chmod 600 \(path)")
        }
        // A key file is small: read at most one byte past 64 KiB, into a buffer that never regrows and is cleared.
        let limit = 65_536
        let contents = UnsafeMutableRawBufferPointer.allocate(byteCount: limit + 1, alignment: 1)
        defer {
            AESGCM.clear(contents)
            contents.deallocate()
        }
        var filled = 0
        while filled <= limit {
            let count = Glibc.read(descriptor, contents.baseAddress! + filled, contents.count - filled)
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("the key file cannot be read", errno: errno)
            }
            if count == 0 { break }
            filled += count
        }
        guard filled <= limit else { throw failure("the key file is longer than 64 KiB: it holds no key") }
        return try body(UnsafeRawBufferPointer(rebasing: contents[..<filled]))
    }

    /// The key in the environment variable `name` (read in place by `getenv`), in the key file forms.
    ///
    /// - Throws: ``WLStorageError/Code/invalidConfiguration`` when the variable is unset or holds no key.
    public init(environmentVariable name: String) throws {
        guard let text = getenv(name) else {
            throw WLStorageError(code: .invalidConfiguration, message: "the environment variable \(name) is not set")
        }
        let bytes: [UInt8]
        do {
            bytes = try Self.decode(UnsafeRawBufferPointer(start: text, count: strlen(text)))
        } catch var error as WLStorageError {
            error.message = "the environment variable \(name): " + error.message
            throw error
        }
        try self.init(bytes: bytes)
    }

    /// The key in `contents`: 32 bytes are the key unless all text; anything else is base64 of 32 bytes.
    private static func decode(_ contents: UnsafeRawBufferPointer) throws -> [UInt8] {
        if contents.count == AESGCM.keyLength {
            if !contents.allSatisfy({ (0x20...0x7e).contains($0) || isWhiteSpace($0) }) { return Array(contents) }
            throw WLStorageError(
                code: .invalidConfiguration,
                message: "no key: \(AESGCM.keyLength) characters of text are refused as a key, since they could be"
                    + " read two ways: as a key's \(AESGCM.keyLength) raw bytes (which are never all text but by a"
                    + " chance of less than 1 in 10^13), or as the text of a shorter key (hex or base64) or a"
                    + " passphrase; give the base64 text of \(AESGCM.keyLength) bytes (44 characters), for instance"
                    + " from: head -c 32 /dev/urandom | base64")
        }
        let start = contents.firstIndex { !isWhiteSpace($0) } ?? contents.count
        let end = (contents.lastIndex { !isWhiteSpace($0) } ?? -1) + 1
        guard start < end, let key = decodeBase64Key(UnsafeRawBufferPointer(rebasing: contents[start..<end])) else {
            throw WLStorageError(
                code: .invalidConfiguration,
                message: "no key: expected the base64 text of \(AESGCM.keyLength) bytes (44 characters, white space"
                    + " around them ignored), or \(AESGCM.keyLength) raw bytes")
        }
        return key
    }

    private static func isWhiteSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0d).contains(byte) }

    /// The 32 bytes whose padded standard base64 is `text`, or `nil`; decoded in place, cleared on failure.
    private static func decodeBase64Key(_ text: UnsafeRawBufferPointer) -> [UInt8]? {
        let characters = (AESGCM.keyLength * 8 + 5) / 6  // 43, then one "="
        guard text.count == characters + 1, text[characters] == UInt8(ascii: "=") else { return nil }
        var decoded = true
        let key = [UInt8](unsafeUninitializedCapacity: AESGCM.keyLength) { buffer, count in
            var accumulator: UInt32 = 0
            var bits = 0
            var filled = 0
            for byte in text[..<characters] {
                guard let value = base64Value(byte) else {
                    decoded = false
                    break
                }
                accumulator = accumulator << 6 | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    buffer[filled] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                    filled += 1
                }
            }
            if decoded, accumulator & ((1 << UInt32(bits)) - 1) != 0 { decoded = false }
            accumulator = 0
            if !decoded { AESGCM.clear(UnsafeMutableRawBufferPointer(buffer)) }
            count = decoded ? filled : 0
        }
        return decoded ? key : nil
    }

    private static func base64Value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }

    /// A new random key, from OpenSSL's random generator.
    public static func random() throws -> WLStorageEncryptionKey {
        let bytes: [UInt8]
        do {
            bytes = try AESGCM.randomBytes(count: AESGCM.keyLength)
        } catch {
            throw WLStorageError(
                code: .invalidConfiguration, message: "no random key could be made: \(error)", underlying: error)
        }
        return try WLStorageEncryptionKey(bytes: bytes)
    }

    /// The base64 text of the key's bytes, as a key file holds it: the secret itself; keep it out of logs.
    public var base64EncodedSecret: String { Data(bytes).base64EncodedString() }

    /// `WLStorageEncryptionKey(fingerprint: 1a2b3c4d)`.
    public var description: String { "WLStorageEncryptionKey(fingerprint: \(fingerprintText))" }

    package var fingerprintText: String { SHA256.hex(fingerprint) }
}

extension WLStorageEncryptionKey: CustomReflectable {
    /// The fingerprint only: `dump`, debuggers and anything else that reflects never see the key's bytes.
    public var customMirror: Mirror { Mirror(self, children: ["fingerprint": fingerprintText]) }
}
