import Foundation
import Testing
import WLStorageCrypto
@testable import WLStorage

@Suite(.capturingOutput) struct SHA256KnownAnswerTests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("/", "8a5edab282632443219e051e4ade2d1d5bbc671c781051bf1437897cbdfea0f1"),
        (".", "cdb4ee2aea69cc6a83331bbe96dc2caa9a299d21329efb0336fc02a82e1839a8"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("user/settings", "78091f41fc0c99a7019c07f5d9c754e015cc7a03a41215ca2adacdfd9504d6a1"),
    ])
    func hexDigestMatchesTheKnownAnswer(input: String, expected: String) {
        #expect(SHA256.hexDigest(of: input) == expected)
    }
}
