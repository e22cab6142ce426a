// A key that looks like a hash is not the key whose hash it is.
import Dispatch
import Foundation
import Synchronization
import Testing
import WLStorageCrypto

@testable import WLStorage

@Suite(.capturingOutput) struct KeyLikeAHashTests {
    /// `a b` is not a plain key, so its file is named by its SHA-256; `x` is a plain key, named by itself.
    @Test(arguments: ["a b", "x"])
    func aKeyOfSixtyFourHexDigitsIsNotTheKeyWhoseHashItIs(hashedKey: String) throws {
        try withTemporaryDirectory { directory in
            let digest = try #require(SHA256.hexDigest(of: hashedKey))
            let hashed = fileStorage(hashedKey, in: directory, default: "hashed default", flushInterval: nil)
            let lookalike = fileStorage(digest, in: directory, default: "lookalike default", flushInterval: nil)
            #expect(lookalike.key == digest)
            #expect(hashed.key == hashedKey)
            #expect(lookalike.wrappedValue == "lookalike default")
            hashed.wrappedValue = "one"
            lookalike.wrappedValue = "two"
            #expect(hashed.wrappedValue == "one")
            hashed.flush()
            lookalike.flush()
            #expect(entries(of: directory).count == 2, "\(entries(of: directory))")
        }
    }
}
