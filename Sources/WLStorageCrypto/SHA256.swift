internal import CWLStorageOpenSSL

/// SHA-256 through OpenSSL libcrypto's EVP interface, with the algorithm fetched once per process.
package enum SHA256 {
    private static let algorithm = FetchedAlgorithm(
        pointer: OpenSSLLibrary.shared.initialized ? EVP_MD_fetch(nil, "SHA256", nil) : nil)

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
        return string.withUTF8 { digest(of: UnsafeRawBufferPointer($0)) }.map(hex)
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
