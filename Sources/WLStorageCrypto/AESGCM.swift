internal import CWLStorageOpenSSL
import Foundation

/// A failure to seal or open bytes with ``AESGCM`` or ``SealedBox``; no case carries plaintext, ciphertext or keys.
package enum CipherError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidKeyLength(Int)
    case invalidNonceLength(Int)
    case invalidTagLength(Int)
    /// `reason` is OpenSSL's first queued error, if any.
    case libcryptoFailed(function: String, reason: String?)
    case authenticationFailed, notASealedBox, noMatchingKey
    case unsupportedVersion(UInt8)

    package var description: String {
        switch self {
        case .invalidKeyLength(let length): "The key is \(length) bytes long, not \(AESGCM.keyLength)."
        case .invalidNonceLength(let length): "The nonce is \(length) bytes long, not \(AESGCM.nonceLength)."
        case .invalidTagLength(let length): "The tag is \(length) bytes long, not \(AESGCM.tagLength)."
        case .libcryptoFailed(let function, let reason):
            "libcrypto's \(function) failed" + (reason.map { ": \($0)" } ?? ".")
        case .authenticationFailed:
            "Authentication failed: the bytes were altered, or the key is not the one they were sealed with."
        case .notASealedBox: "The bytes are not a sealed box: the magic bytes are missing or the box is truncated."
        case .unsupportedVersion(let version): "The sealed box has version \(version), which this program cannot open."
        case .noMatchingKey: "No key given has the fingerprint of the key the box was sealed with."
        }
    }

    /// What a call into libcrypto throws once the program is ending (``OpenSSLLibrary``).
    static let programEnding = CipherError.libcryptoFailed(function: "exit", reason: "the program is ending")
}

/// AES-256-GCM through OpenSSL libcrypto's EVP interface, the cipher fetched once; a context per call, so calls run on
/// any number of threads. A nonce must never be used twice with one key (a random one each time). The key goes to
/// libcrypto straight from the caller's array, and `EVP_CIPHER_CTX_free` clears its schedule; a failed `open` clears
/// what it decrypted; plaintexts are not cleared.
package enum AESGCM {
    /// Lengths in bytes of a key, a nonce (the initialization vector) and an authentication tag.
    package static let keyLength = 32
    package static let nonceLength = 12
    package static let tagLength = 16

    private static let algorithm = FetchedAlgorithm(
        pointer: OpenSSLLibrary.shared.initialized ? EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) : nil)

    /// The largest piece of input passed to one `EVP_*Update` call, whose length is a C `int`.
    private static let maximumChunk = 1 << 30

    private typealias InitFunction = (
        OpaquePointer?, OpaquePointer?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?, UnsafePointer<OSSL_PARAM>?
    ) -> Int32

    private typealias UpdateFunction = (
        OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int32>?, UnsafePointer<UInt8>?, Int32
    ) -> Int32

    /// Encrypts `plaintext` under `key` and `nonce`, authenticating it with `additionalData`. Throws a ``CipherError``.
    package static func seal(
        _ plaintext: Data, key: [UInt8], nonce: [UInt8], additionalData: Data = Data()
    ) throws -> (ciphertext: Data, tag: Data) {
        guard key.count == keyLength else { throw CipherError.invalidKeyLength(key.count) }
        guard nonce.count == nonceLength else { throw CipherError.invalidNonceLength(nonce.count) }
        return try withContext { context, cipher in
            try nonce.withUnsafeBufferPointer { nonce in
                try initialize(
                    context, cipher, key: key, nonce: nonce.baseAddress!, function: EVP_EncryptInit_ex2,
                    name: "EVP_EncryptInit_ex2")
            }
            try additionalData.withUnsafeBytes { aad in
                try update(context, aad, output: nil, function: EVP_EncryptUpdate, name: "EVP_EncryptUpdate")
            }
            var ciphertext = Data(count: plaintext.count)
            try ciphertext.withUnsafeMutableBytes { output in
                try plaintext.withUnsafeBytes { input in
                    try update(context, input, output: output, function: EVP_EncryptUpdate, name: "EVP_EncryptUpdate")
                }
            }
            // GCM is a stream mode: the final call writes nothing.
            var finalOutput = [UInt8](repeating: 0, count: tagLength)
            var finalLength: Int32 = 0
            try check(EVP_EncryptFinal_ex(context, &finalOutput, &finalLength), "EVP_EncryptFinal_ex")
            guard finalLength == 0 else {
                throw CipherError.libcryptoFailed(function: "EVP_EncryptFinal_ex", reason: "unexpected output")
            }
            var tag = Data(count: tagLength)
            try tag.withUnsafeMutableBytes { tag in
                let result = EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), tag.baseAddress)
                try check(result, "EVP_CIPHER_CTX_ctrl(EVP_CTRL_GCM_GET_TAG)")
            }
            return (ciphertext, tag)
        }
    }

    /// Decrypts `ciphertext` in place, returning the plaintext only if `tag` verifies with the additional data, given
    /// in two pieces (authenticated as if joined) so that a sealed box opens without a copy. Throws ``CipherError``.
    package static func open(
        ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, key: [UInt8], nonce: UnsafeRawBufferPointer,
        additionalData: UnsafeRawBufferPointer, _ moreAdditionalData: UnsafeRawBufferPointer
    ) throws -> Data {
        guard key.count == keyLength else { throw CipherError.invalidKeyLength(key.count) }
        guard nonce.count == nonceLength, let nonceBase = nonce.baseAddress else {
            throw CipherError.invalidNonceLength(nonce.count)
        }
        guard tag.count == tagLength, let tagBase = tag.baseAddress else {
            throw CipherError.invalidTagLength(tag.count)
        }
        return try withContext { context, cipher in
            try initialize(
                context, cipher, key: key, nonce: nonceBase.assumingMemoryBound(to: UInt8.self),
                function: EVP_DecryptInit_ex2, name: "EVP_DecryptInit_ex2")
            try update(context, additionalData, output: nil, function: EVP_DecryptUpdate, name: "EVP_DecryptUpdate")
            try update(
                context, moreAdditionalData, output: nil, function: EVP_DecryptUpdate, name: "EVP_DecryptUpdate")
            var plaintext = Data(count: ciphertext.count)
            do {
                try plaintext.withUnsafeMutableBytes { output in
                    try update(
                        context, ciphertext, output: output, function: EVP_DecryptUpdate, name: "EVP_DecryptUpdate")
                }
                // The ctrl call takes a mutable pointer, and only reads the tag, which is not secret.
                let result = EVP_CIPHER_CTX_ctrl(
                    context, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), UnsafeMutableRawPointer(mutating: tagBase))
                try check(result, "EVP_CIPHER_CTX_ctrl(EVP_CTRL_GCM_SET_TAG)")
                let finished = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: tagLength) { finalOutput in
                    var finalLength: Int32 = 0
                    let result = EVP_DecryptFinal_ex(context, finalOutput.baseAddress, &finalLength)
                    return (result, finalLength)
                }
                guard finished.0 == 1 else {
                    ERR_clear_error()
                    throw CipherError.authenticationFailed
                }
                guard finished.1 == 0 else {
                    throw CipherError.libcryptoFailed(function: "EVP_DecryptFinal_ex", reason: "unexpected output")
                }
            } catch {
                // Decrypted bytes not authenticated are cleared rather than left in memory.
                plaintext.withUnsafeMutableBytes { clear($0) }
                throw error
            }
            return plaintext
        }
    }

    /// `count` bytes from `RAND_bytes`, OpenSSL's cryptographically secure generator, for a nonce or a key.
    package static func randomBytes(count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return bytes }
        guard OpenSSLLibrary.enter() else { throw CipherError.programEnding }
        defer { OpenSSLLibrary.leave() }
        try check(RAND_bytes(&bytes, Int32(count)), "RAND_bytes")
        return bytes
    }

    /// Overwrites `bytes` with zeros through `OPENSSL_cleanse`, which the compiler does not remove as a dead store.
    package static func clear(_ bytes: UnsafeMutableRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        OPENSSL_cleanse(base, bytes.count)
    }

    /// Runs `body` with a new cipher context, which is freed (and its key schedule cleared) when `body` returns.
    private static func withContext<Result>(
        _ body: (_ context: OpaquePointer, _ cipher: OpaquePointer) throws -> Result
    ) throws -> Result {
        guard let cipher = algorithm.pointer else { throw failure("EVP_CIPHER_fetch(AES-256-GCM)") }
        guard OpenSSLLibrary.enter() else { throw CipherError.programEnding }
        defer { OpenSSLLibrary.leave() }
        guard let context = EVP_CIPHER_CTX_new() else { throw failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        return try body(context, cipher)
    }

    /// Sets cipher, nonce length, key and nonce (`EVP_EncryptInit_ex2` or `EVP_DecryptInit_ex2`).
    private static func initialize(
        _ context: OpaquePointer, _ cipher: OpaquePointer, key: [UInt8], nonce: UnsafePointer<UInt8>,
        function: InitFunction, name: String
    ) throws {
        try check(function(context, cipher, nil, nil, nil), name)
        let result = EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonceLength), nil)
        try check(result, "EVP_CIPHER_CTX_ctrl(EVP_CTRL_GCM_SET_IVLEN)")
        try key.withUnsafeBufferPointer { key in
            try check(function(context, nil, key.baseAddress, nonce, nil), name)
        }
    }

    /// Passes `input` through `function` in C-`int` pieces: additional data without `output`, else byte for byte.
    private static func update(
        _ context: OpaquePointer, _ input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer?,
        function: UpdateFunction, name: String
    ) throws {
        guard let inputBase = input.baseAddress, input.count > 0 else { return }
        var offset = 0
        while offset < input.count {
            let length = min(input.count - offset, maximumChunk)
            let source = (inputBase + offset).assumingMemoryBound(to: UInt8.self)
            let destination = output?.baseAddress.map { ($0 + offset).assumingMemoryBound(to: UInt8.self) }
            var written: Int32 = 0
            try check(function(context, destination, &written, source, Int32(length)), name)
            if output != nil, written != Int32(length) {
                throw CipherError.libcryptoFailed(function: name, reason: "unexpected output length")
            }
            offset += length
        }
    }

    private static func check(_ result: Int32, _ function: String) throws {
        guard result == 1 else { throw failure(function) }
    }

    /// A ``CipherError/libcryptoFailed(function:reason:)`` with OpenSSL's first queued reason; the queue is emptied.
    private static func failure(_ function: String) -> CipherError {
        let code = ERR_get_error()
        defer { ERR_clear_error() }
        guard code != 0 else { return .libcryptoFailed(function: function, reason: nil) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let reason = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return .libcryptoFailed(function: function, reason: reason)
    }
}

/// The versioned format of bytes sealed with AES-256-GCM for storage: a header, the ciphertext and the tag.
///
/// | bytes | content |
/// | --- | --- |
/// | 4 | the magic bytes `WLSE` |
/// | 1 | the version, 1 |
/// | 4 | the key's fingerprint: the first 4 bytes of the SHA-256 of the 32 key bytes |
/// | 12 | the nonce, random for each seal |
/// | n | the ciphertext, as long as the plaintext |
/// | 16 | the tag |
///
/// The additional data is the 21 header bytes then the storage key's UTF-8 bytes, so no header byte can change and
/// one key's box does not open under another. The fingerprint picks the key among current and older ones.
package enum SealedBox {
    package static let magic: [UInt8] = Array("WLSE".utf8)
    /// The version this code writes and the only one it opens.
    package static let version: UInt8 = 1
    package static let fingerprintLength = 4
    package static let headerLength = 4 + 1 + fingerprintLength + AESGCM.nonceLength
    /// The length of the smallest box, which holds an empty plaintext.
    package static let minimumLength = headerLength + AESGCM.tagLength

    package static func fingerprint(of key: [UInt8]) throws -> [UInt8] {
        guard key.count == AESGCM.keyLength else { throw CipherError.invalidKeyLength(key.count) }
        guard let digest = key.withUnsafeBytes({ SHA256.digest(of: $0) }) else {
            throw CipherError.libcryptoFailed(function: "EVP_Digest(SHA256)", reason: nil)
        }
        return Array(digest.prefix(fingerprintLength))
    }

    /// Whether `bytes` start with the magic bytes: never JSON, so taken for a sealed value even when cut short.
    package static func startsAsSealed(_ bytes: some Collection<UInt8>) -> Bool { bytes.starts(with: magic) }

    /// The sealing key's fingerprint from a header with magic, version 1 and a whole fingerprint, else `nil`.
    package static func fingerprint(ofKeyThatSealed bytes: some Collection<UInt8>) -> [UInt8]? {
        let header = Array(bytes.prefix(magic.count + 1 + fingerprintLength))
        guard header.count == magic.count + 1 + fingerprintLength, header.starts(with: magic),
            header[magic.count] == version
        else { return nil }
        return Array(header[(magic.count + 1)...])
    }

    /// Seals `plaintext` under `key` with a new random nonce, bound to `associatedKey`. Throws a ``CipherError``.
    package static func seal(
        _ plaintext: Data, key: [UInt8], fingerprint knownFingerprint: [UInt8]? = nil, associatedKey: String
    ) throws -> Data {
        let fingerprint = try knownFingerprint ?? fingerprint(of: key)
        let nonce = try AESGCM.randomBytes(count: AESGCM.nonceLength)
        var sealed = Data(capacity: minimumLength + plaintext.count)
        sealed.append(contentsOf: magic + [version] + fingerprint + nonce)
        // The header then the storage key's UTF-8 bytes; the header's fixed length keeps the pairs apart.
        var additionalData = sealed
        additionalData.append(contentsOf: associatedKey.utf8)
        let (ciphertext, tag) = try AESGCM.seal(plaintext, key: key, nonce: nonce, additionalData: additionalData)
        sealed.append(ciphertext)
        sealed.append(tag)
        return sealed
    }

    /// Opens `sealed`, stored under `associatedKey`, with whichever of `keys` sealed it (only fingerprint matches are
    /// tried, in order); returns the plaintext and that key's index. `fingerprints`, when given, are those of `keys`.
    /// ``CipherError/authenticationFailed``: altered, another storage key's box, or a wrong key matching by chance.
    package static func open(
        _ sealed: Data, keys: [[UInt8]], fingerprints knownFingerprints: [[UInt8]]? = nil, associatedKey: String
    ) throws -> (plaintext: Data, keyIndex: Int) {
        let fingerprints = try knownFingerprints ?? keys.map { try fingerprint(of: $0) }
        var associatedKey = associatedKey
        return try associatedKey.withUTF8 { associated in
            try sealed.withUnsafeBytes { box -> (plaintext: Data, keyIndex: Int) in
                guard box.count > magic.count, box.starts(with: magic) else { throw CipherError.notASealedBox }
                let boxVersion = box[magic.count]
                guard boxVersion == version else { throw CipherError.unsupportedVersion(boxVersion) }
                guard box.count >= minimumLength else { throw CipherError.notASealedBox }
                let fingerprintStart = magic.count + 1
                let nonceStart = fingerprintStart + fingerprintLength
                let boxFingerprint = UnsafeRawBufferPointer(rebasing: box[fingerprintStart..<nonceStart])
                let nonce = UnsafeRawBufferPointer(rebasing: box[nonceStart..<headerLength])
                let ciphertext = UnsafeRawBufferPointer(rebasing: box[headerLength..<(box.count - AESGCM.tagLength)])
                let tag = UnsafeRawBufferPointer(rebasing: box[(box.count - AESGCM.tagLength)...])
                let header = UnsafeRawBufferPointer(rebasing: box[..<headerLength])
                var matched = false
                for (index, key) in keys.enumerated() where fingerprints[index].elementsEqual(boxFingerprint) {
                    matched = true
                    do {
                        let plaintext = try AESGCM.open(
                            ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, additionalData: header,
                            UnsafeRawBufferPointer(associated))
                        return (plaintext, index)
                    } catch CipherError.authenticationFailed {
                        continue  // another key may have the same fingerprint
                    }
                }
                throw matched ? CipherError.authenticationFailed : CipherError.noMatchingKey
            }
        }
    }
}
