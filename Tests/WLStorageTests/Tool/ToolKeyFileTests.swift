import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `wlstorage --key-file`: values sealed and opened with a key file, and a key file or key that is not right.
@Suite(.capturingOutput) struct ToolKeyFileTests {
    @Test func setThenGetWithAKeyFileRoundTripsTheValueThroughAnEncryptedFile() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root)
            let json = #"{"token": "s3cr3t-value", "n": 1.50}"#
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", "api", json], in: root)
            #expect(set.status == 0)

            let file = store.appendingPathComponent("api")
            let stored = try #require(FileManager.default.contents(atPath: file.path))
            #expect(stored.starts(with: Array("WLSE".utf8)))
            #expect(stored.range(of: Data("s3cr3t-value".utf8)) == nil)
            #expect(mode(of: file) == 0o600)

            let get = try await ToolRun.run(["--dir", store.path, "--key-file", keyFile.path, "get", "api"], in: root)
            #expect(get.status == 0)
            #expect(get.stdout == "{\n  \"token\": \"s3cr3t-value\",\n  \"n\": 1.50\n}\n")

            // Without the key, the file is not JSON; with it, list and verify find it good.
            #expect(try await ToolRun.run(["--dir", store.path, "get", "api"], in: root).status == 1)
            let list = try await ToolRun.run(["--dir", store.path, "--key-file", keyFile.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(list.stdout.split(separator: "\n").contains { $0.hasPrefix("api ") && $0.hasSuffix("  encrypted") })
        }
    }

    @Test func aValueTheLibraryEncryptedIsReadByTheTool() async throws {
        struct Credentials: Codable, Equatable {
            var user: String
            var scopes: [String]
        }
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("store")
            let (keyFile, key) = try makeKeyFile(in: root)
            do {
                let storage = WLStorage(
                    key: "credentials", defaultValue: Credentials(user: "", scopes: []), flushInterval: nil,
                    store: WLStorageEncryptedStore(.directory(directory), key: key))
                storage.wrappedValue = Credentials(user: "ada", scopes: ["read", "write"])
                storage.flush()
                #expect(storage.lastError == nil)
            }
            let get = try await ToolRun.run(
                ["--dir", directory.path, "--key-file", keyFile.path, "get", "credentials"], in: root)
            #expect(get.status == 0)
            let printed = try JSONDecoder().decode(Credentials.self, from: Data(get.stdout.utf8))
            #expect(printed == Credentials(user: "ada", scopes: ["read", "write"]))
        }
    }

    @Test func verifyWithAKeyFilePassesOnGoodFilesAndNamesAFileWithOneFlippedBit() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root)
            for (key, json) in [("count", "3"), ("profile", #"{"name":"Ada"}"#), ("nothing", "null")] {
                let set = try await ToolRun.run(
                    ["--dir", store.path, "--key-file", keyFile.path, "set", key, json], in: root)
                #expect(set.status == 0)
            }
            let verify = ["--dir", store.path, "--key-file", keyFile.path, "verify"]
            let good = try await ToolRun.run(verify, in: root)
            #expect(good.status == 0)
            #expect(good.stdout.contains("3 key files checked"))
            #expect(good.stdout.contains("no problems"))

            let file = store.appendingPathComponent("profile")
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: file.path)))
            bytes[bytes.count - 20] ^= 0x01  // in the ciphertext
            try Data(bytes).write(to: file)
            let bad = try await ToolRun.run(verify, in: root)
            #expect(bad.status == 1)
            #expect(bad.stdout.contains("bad: profile: does not open with the key"))
            #expect(!bad.stdout.contains("bad: count"))
            #expect(bad.stdout.contains("1 problem"))
            #expect(!bad.stdout.contains("Ada"))

            // A plain JSON file among encrypted ones is flagged too.
            try Data("42".utf8).write(to: store.appendingPathComponent("plain"))
            let plain = try await ToolRun.run(verify, in: root)
            #expect(plain.status == 1)
            #expect(plain.stdout.contains("bad: plain: not encrypted"))
        }
    }

    @Test func listWithItsKeyOpensAnEncryptedFileNamedByAHash() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root)
            let options = ["--dir", store.path, "--key-file", keyFile.path]
            #expect(try await ToolRun.run(options + ["set", "user/token", #""t""#], in: root).status == 0)

            let unnamed = try await ToolRun.run(options + ["list"], in: root)
            #expect(unnamed.stdout.contains("(hashed)"))
            #expect(unnamed.stdout.hasSuffix("encrypted, not opened\n"))
            let named = try await ToolRun.run(options + ["list", "user/token"], in: root)
            #expect(named.status == 0)
            let row = try #require(named.stdout.split(separator: "\n").last)
            #expect(row.contains("  user/token  "))
            #expect(row.hasSuffix("  encrypted"))
        }
    }

    @Test func aKeyFileThatOthersCanReadIsRefused() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root, mode: 0o644)
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", "k", "1"], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.contains("the key file can be read by"))
            #expect(set.stderr.contains("chmod 600"))
            #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("k").path))

            let missing = try await ToolRun.run(
                ["--dir", store.path, "--key-file", root.appendingPathComponent("absent.key").path, "list"], in: root)
            #expect(missing.status == 1)
            #expect(missing.stderr.contains("the key file cannot be read"))
        }
    }

    @Test func getWithTheWrongKeyFailsNamingTheFileWithoutPrintingTheValue() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (rightKey, _) = try makeKeyFile(in: root, named: "right.key")
            let (wrongKey, _) = try makeKeyFile(in: root, named: "wrong.key")
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", rightKey.path, "set", "api", #""hunter2-secret""#], in: root)
            #expect(set.status == 0)

            let get = try await ToolRun.run(["--dir", store.path, "--key-file", wrongKey.path, "get", "api"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains("does not open"))
            #expect(get.stderr.contains(store.appendingPathComponent("api").path))
            #expect(!get.stderr.contains("hunter2"))
        }
    }

    @Test(arguments: ["api", "with space"])
    func setAndRmWithoutAKeyFileLeaveASealedValueAndSayWhichKeySealedIt(key storageKey: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, key) = try makeKeyFile(in: root)
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", storageKey, #""s3cr3t""#], in: root)
            #expect(set.status == 0)
            let path = try await ToolRun.run(["--dir", store.path, "path", storageKey], in: root).stdout
                .trimmingCharacters(in: .newlines)
            let sealed = try #require(FileManager.default.contents(atPath: path))

            for command in [["set", storageKey, #""plain""#], ["rm", storageKey]] {
                let run = try await ToolRun.run(["--dir", store.path] + command, in: root)
                #expect(run.status == 1, "\(command)")
                #expect(run.stderr.contains("sealed with key \(fingerprint(of: key))"), "\(run.stderr)")
                #expect(run.stderr.contains("pass --key-file"), "\(run.stderr)")
                #expect(run.stderr.contains(path), "\(run.stderr)")
                #expect(FileManager.default.contents(atPath: path) == sealed, "\(command)")
            }

            // With the key file, the value is replaced and removed as before.
            let replace = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", storageKey, "2"], in: root)
            #expect(replace.status == 0)
            let remove = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "rm", storageKey], in: root)
            #expect(remove.status == 0)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func getListAndVerifyWithoutAKeyFileSayAValueIsSealedAndWithWhichKey() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, key) = try makeKeyFile(in: root)
            let set = try await ToolRun.run(
                ["--dir", store.path, "--key-file", keyFile.path, "set", "api", #""s3cr3t""#], in: root)
            #expect(set.status == 0)
            let sealed = "sealed with key \(fingerprint(of: key)); pass --key-file"

            let get = try await ToolRun.run(["--dir", store.path, "get", "api"], in: root)
            #expect(get.status == 1)
            #expect(get.stdout.isEmpty)
            #expect(get.stderr.contains(sealed), "\(get.stderr)")
            #expect(!get.stderr.contains("JSON"), "\(get.stderr)")

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(list.stdout.split(separator: "\n").contains { $0.hasPrefix("api ") && $0.hasSuffix("  " + sealed) })
            #expect(!list.stdout.contains("invalid JSON"))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("bad: api: \(sealed)"), "\(verify.stdout)")
            #expect(!verify.stdout.contains("JSON"), "\(verify.stdout)")
        }
    }

    @Test func aWrongKeyFileNamesTheKeyThatSealedTheValueAndTheKeyGiven() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (rightFile, right) = try makeKeyFile(in: root, named: "right.key")
            let (wrongFile, wrong) = try makeKeyFile(in: root, named: "wrong.key")
            for key in ["api", "with space"] {
                let set = try await ToolRun.run(
                    ["--dir", store.path, "--key-file", rightFile.path, "set", key, "1"], in: root)
                #expect(set.status == 0)
            }
            let both = [fingerprint(of: right), fingerprint(of: wrong)]
            for command in [["get", "api"], ["set", "api", "2"], ["get", "with space"], ["set", "with space", "2"]] {
                let run = try await ToolRun.run(
                    ["--dir", store.path, "--key-file", wrongFile.path] + command, in: root)
                #expect(run.status == 1, "\(command)")
                #expect(run.stderr.contains("sealed with key \(both[0])"), "\(command): \(run.stderr)")
                #expect(run.stderr.contains("the key file has key \(both[1])"), "\(command): \(run.stderr)")
            }
            let verify = try await ToolRun.run(["--dir", store.path, "--key-file", wrongFile.path, "verify"], in: root)
            #expect(verify.status == 1)
            let bad = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("bad: ") }
            #expect(bad.count == 2, "\(verify.stdout)")
            for line in bad {
                #expect(line.contains("sealed with key \(both[0])") && line.contains("has key \(both[1])"), "\(line)")
            }
        }
    }

    @Test func aKeyFileOwnedByAnotherUserIsRefusedByTheTool() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let (keyFile, _) = try makeKeyFile(in: root)
            #expect(chown(keyFile.path, 65534, 65534) == 0)
            for command in [["set", "k", "1"], ["list"]] {
                let run = try await ToolRun.run(["--dir", store.path, "--key-file", keyFile.path] + command, in: root)
                #expect(run.status == 1, "\(command)")
                #expect(run.stderr.contains("the key file is owned by uid 65534"), "\(run.stderr)")
                #expect(run.stderr.contains(keyFile.path))
            }
            #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("k").path))
        }
    }
}

/// The fingerprint of `key` in hexadecimal, as its description shows it.
private func fingerprint(of key: WLStorageEncryptionKey) -> String {
    String(key.description.dropFirst("WLStorageEncryptionKey(fingerprint: ".count).dropLast())
}

/// A key file holding the base64 text of a new random key, with `mode`, and the key.
private func makeKeyFile(
    in root: URL, named name: String = "storage.key", mode: mode_t = 0o600
) throws -> (URL, WLStorageEncryptionKey) {
    let key = try WLStorageEncryptionKey.random()
    let url = root.appendingPathComponent(name)
    try Data((key.base64EncodedSecret + "\n").utf8).write(to: url)
    guard chmod(url.path, mode) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return (url, key)
}
