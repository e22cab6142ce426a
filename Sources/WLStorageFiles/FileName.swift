import WLStorageCrypto

/// How a key becomes a file name: a key of 1 to 127 bytes of `[A-Za-z0-9._-]`, not `.`, `..` or 64 lowercase hex
/// digits, is its own name; any other is the lowercase hex SHA-256 of its UTF-8 bytes. One to one, never a `/` or `~`
/// (free for temporary files); keys compare as UTF-8 bytes, as file names do.
package enum FileName {
    /// The longest key, in bytes, that is used as a file name as it is.
    package static let maximumPlainLength = 127

    /// The file name for `key`, or `nil` when the key needs hashing and libcrypto cannot hash it.
    package static func forKey(_ key: String) -> String? { isPlain(key) ? key : SHA256.hexDigest(of: key) }

    package static func isPlain(_ key: String) -> Bool {
        let utf8 = key.utf8
        guard 1...maximumPlainLength ~= utf8.count, key != ".", key != "..", !isDigest(key) else { return false }
        return utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isPlainByte) } ?? utf8.allSatisfy(isPlainByte)
    }

    /// Whether `name` is a name the file of some key has: a plain key or a digest.
    package static func isKeyFileName(_ name: String) -> Bool { isPlain(name) || isDigest(name) }

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
            true
        default: false
        }
    }
}
