import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `wlstorage hash`, `path` and `rm`: where a key's file is, and its removal.
@Suite(.capturingOutput) struct ToolHashPathAndRemoveTests {
    /// Known SHA-256 vectors: a key that is not a plain file name is stored under the hex digest of its UTF-8.
    @Test(arguments: [
        ("plain-Key_1.json", "plain-Key_1.json"),
        ("/", "8a5edab282632443219e051e4ade2d1d5bbc671c781051bf1437897cbdfea0f1"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (".", "cdb4ee2aea69cc6a83331bbe96dc2caa9a299d21329efb0336fc02a82e1839a8"),
        ("..", "5ec1f7e700f37c3d0b2981d04855fc34b94aaa15457b05ca571817442d228f81"),
    ])
    func hashPrintsTheFileNameAKeyMapsToWithoutNeedingADirectory(key: String, fileName: String) async throws {
        try await withTemporaryDirectory { root in
            let hash = try await ToolRun.run(["hash", key], in: root)
            #expect(hash.status == 0)
            #expect(hash.stdout == fileName + "\n")
        }
    }

    @Test(arguments: ["a/b", "ключ/é", "with space", "tilde~key", String(repeating: "k", count: 128)])
    func hashOfAnUnsafeKeyIsTheSHA256OfItsUTF8BytesAsSha256sumComputesIt(key: String) async throws {
        try await withTemporaryDirectory { root in
            let input = root.appendingPathComponent("key.txt")
            try Data(key.utf8).write(to: input)
            let reference = try await ToolRun.run(
                [input.path], executable: URL(fileURLWithPath: "/usr/bin/sha256sum"), in: root)
            try #require(reference.status == 0)
            let expected = try #require(reference.stdout.split(separator: " ").first.map(String.init))
            #expect(expected.count == 64)

            let hash = try await ToolRun.run(["hash", key], in: root)
            #expect(hash.status == 0)
            #expect(hash.stdout == expected + "\n")
        }
    }

    @Test func pathPrintsTheAbsolutePathOfTheKeysFileEvenForARelativeDirectory() async throws {
        try await withTemporaryDirectory { root in
            let plain = try await ToolRun.run(["--dir", "store", "path", "settings"], in: root)
            #expect(plain.status == 0)
            #expect(plain.stdout == root.appendingPathComponent("store/settings").path + "\n")

            let hashed = try await ToolRun.run(["--dir", "store", "path", "/"], in: root)
            #expect(hashed.status == 0)
            let digest = "8a5edab282632443219e051e4ade2d1d5bbc671c781051bf1437897cbdfea0f1"
            #expect(hashed.stdout == root.appendingPathComponent("store/" + digest).path + "\n")
        }
    }

    @Test func rmRemovesTheFileAndExitsWithOneWhenThereIsNone() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", "1"], in: root).status == 0)
            #expect(entries(of: store).count == 1)

            let first = try await ToolRun.run(["--dir", store.path, "rm", "a/b"], in: root)
            #expect(first.status == 0)
            #expect(entries(of: store).isEmpty)

            let second = try await ToolRun.run(["--dir", store.path, "rm", "a/b"], in: root)
            #expect(second.status == 1)
            #expect(second.stderr.contains("no value stored"))
        }
    }
}
