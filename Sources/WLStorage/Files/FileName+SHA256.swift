internal import CWLStorageOpenSSL

/// How a key becomes a file name in the storage directory.
///
/// A key of 1 to 127 bytes of `[A-Za-z0-9._-]`, not `.`, `..` or 64 lowercase hex digits, is its own name; any other
/// is the lowercase hex SHA-256 of its UTF-8 bytes. One to one, never a `/` or `~` (free for temporary files).
/// Keys are compared as UTF-8 bytes, as file names are.
package enum FileName {
    /// The longest key, in bytes, that is used as a file name as it is.
    package static let maximumPlainLength = 127

    /// The file name for `key`, or `nil` when the key needs hashing and libcrypto cannot hash it.
    package static func forKey(_ key: String) -> String? {
        isPlain(key) ? key : SHA256.hexDigest(of: key)
    }

    /// Whether `key` is used as its own file name.
    package static func isPlain(_ key: String) -> Bool {
        let utf8 = key.utf8
        guard (1...maximumPlainLength).contains(utf8.count), key != ".", key != ".." else { return false }
        return utf8.allSatisfy(isPlainByte) && !isDigest(key)
    }

    /// Whether `name` is a name the file of some key has: a plain key or a digest.
    package static func isKeyFileName(_ name: String) -> Bool {
        isPlain(name) || isDigest(name)
    }

    /// Whether `name` has the form of a hashed key's file name: 64 lowercase hex digits. No plain key has that form.
    package static func isDigest(_ name: String) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy(isLowercaseHexDigit)
    }

    @inline(__always)
    package static func isLowercaseHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    /// `value` as 16 lowercase hex digits.
    package static func hex(of value: UInt64) -> String {
        SHA256.hex(withUnsafeBytes(of: value.bigEndian) { Array($0) })
    }

    @inline(__always)
    static func isPlainByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

/// SHA-256 through OpenSSL libcrypto's EVP interface, with the algorithm fetched once per process.
package enum SHA256 {
    private static let algorithm = FetchedAlgorithm(
        pointer: OpenSSLLibrary.initialized ? EVP_MD_fetch(nil, "SHA256", nil) : nil)

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// The 32-byte SHA-256 of `bytes`, or `nil` when libcrypto cannot compute it. The C function is `EVP_Digest`.
    package static func digest(of bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let md = algorithm.pointer, OpenSSLLibrary.enter() else { return nil }
        defer { OpenSSLLibrary.leave() }
        var length: UInt32 = 0
        let output = [UInt8](unsafeUninitializedCapacity: 32) { out, count in
            let ok = EVP_Digest(bytes.baseAddress, bytes.count, out.baseAddress, &length, md, nil)
            count = ok == 1 && length == 32 ? 32 : 0
        }
        return output.count == 32 ? output : nil
    }

    /// The lowercase hex SHA-256 of the UTF-8 bytes of `string`, or `nil` when libcrypto cannot compute it.
    package static func hexDigest(of string: String) -> String? {
        var string = string
        guard let digest = string.withUTF8({ digest(of: UnsafeRawBufferPointer($0)) }) else { return nil }
        return hex(digest)
    }

    /// `bytes` as lowercase hex digits, two a byte.
    package static func hex(_ bytes: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: 2 * bytes.count) { buffer in
            hexDigits.withUnsafeBufferPointer { hex in
                for (index, byte) in bytes.enumerated() {
                    buffer[2 * index] = hex[Int(byte >> 4)]
                    buffer[2 * index + 1] = hex[Int(byte & 0x0f)]
                }
            }
            return 2 * bytes.count
        }
    }
}
