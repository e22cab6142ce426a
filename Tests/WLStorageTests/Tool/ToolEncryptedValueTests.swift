// The tool on encrypted values: nothing secret reaches the terminal, and nothing is replaced that could not be opened.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

/// Runs the tool built beside the tests, and returns its exit status and standard error.
private func runTool(_ arguments: [String], in root: URL) async throws -> (status: Int32, stderr: String) {
    let run = try await ToolRun.run(arguments, in: root)
    return (run.status, run.stderr)
}

@Suite(.capturingOutput)
struct ToolEncryptedValueTests: EncryptedDirectorySuite {
    let key = try! WLStorageEncryptionKey.random()

    private func keyFile(in directory: URL, _ key: WLStorageEncryptionKey, named name: String = "storage.key") throws
        -> URL
    {
        let url = directory.appendingPathComponent(name)
        try Data((key.base64EncodedSecret + "\n").utf8).write(to: url)
        chmod(url.path, 0o600)
        return url
    }

    private func tool(_ arguments: [String]) throws -> (status: Int32, signaled: Bool, out: String, err: String) {
        let child = try ChildProcess("wlstorage", arguments, unsetting: ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME"])
        let ended = try #require(child.waitForExit())
        return (ended.status, ended.reason == .uncaughtSignal, child.printed, child.printedErrors)
    }

    /// A value that opens but is not JSON (stored by a program through the store directly): the tool says so, and
    /// prints none of its bytes.
    @Test func theToolQuotesNoByteOfAValueThatOpensButIsNotJSON() throws {
        try withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("store")
            let keyURL = try keyFile(in: root, key)
            try store(directory).write(key: "api", data: Data("Zq7-hunter2".utf8))
            let get = try tool(["--dir", directory.path, "--key-file", keyURL.path, "get", "api"])
            #expect(get.status == 1)
            #expect(get.out.isEmpty)
            #expect(!get.err.contains("'Z'"), "\(get.err)")
            let verify = try tool(["--dir", directory.path, "--key-file", keyURL.path, "verify"])
            #expect(verify.status == 1)
            #expect(!verify.out.contains("'Z'") && !verify.err.contains("'Z'"), "\(verify.out)")
        }
    }

    @Test func theToolRefusesBadKeyFilesClearlyAndWrongKeysWithoutPrintingValues() throws {
        try withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("store")
            try store(directory).write(key: "api", data: json(#""hunter2-secret""#))
            let before = try #require(file("api", in: directory))
            // A directory as key file, an empty key file, a key file others can read, a symlink to it.
            let folder = root.appendingPathComponent("keydir")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            chmod(folder.path, 0o700)
            let empty = root.appendingPathComponent("empty.key")
            try Data().write(to: empty)
            chmod(empty.path, 0o600)
            let shared = try keyFile(in: root, key, named: "shared.key")
            chmod(shared.path, 0o640)
            let link = root.appendingPathComponent("link.key")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: shared)
            for bad in [folder, empty, shared, link] {
                for command in [["get", "api"], ["set", "api", "1"], ["list"], ["verify"]] {
                    let run = try tool(["--dir", directory.path, "--key-file", bad.path] + command)
                    #expect(run.status != 0 && !run.signaled, "\(bad.lastPathComponent) \(command)")
                    #expect(run.err.contains("key file") || run.err.contains("no key"), "\(run.err)")
                    #expect(!run.out.contains("hunter2") && !run.err.contains("hunter2"))
                }
            }
            #expect(file("api", in: directory) == before)
            // A wrong key: get, list and verify fail or flag the file, naming it, printing nothing of the value.
            let wrong = try keyFile(in: root, try .random(), named: "wrong.key")
            let get = try tool(["--dir", directory.path, "--key-file", wrong.path, "get", "api"])
            #expect(get.status == 1)
            #expect(get.err.contains(directory.appendingPathComponent("api").path))
            let verify = try tool(["--dir", directory.path, "--key-file", wrong.path, "verify"])
            #expect(verify.status == 1)
            #expect(verify.out.contains("api"))
            let list = try tool(["--dir", directory.path, "--key-file", wrong.path, "list"])
            for run in [get, verify, list] {
                #expect(!run.out.contains("hunter2") && !run.err.contains("hunter2"))
            }
            #expect(file("api", in: directory) == before)
            // A set with the wrong key does not replace a value it cannot open: the value would be lost for good.
            let set = try tool(["--dir", directory.path, "--key-file", wrong.path, "set", "api", #""other""#])
            #expect(set.status == 1)
            #expect(set.err.contains("does not open") && set.err.contains("rm"), "\(set.err)")
            #expect(file("api", in: directory) == before)
            // Once removed, a value can be stored under the other key.
            #expect(try tool(["--dir", directory.path, "--key-file", wrong.path, "rm", "api"]).status == 0)
            #expect(try tool(["--dir", directory.path, "--key-file", wrong.path, "set", "api", "1"]).status == 0)
            #expect(file("api", in: directory) != nil)
        }
    }

    /// `set --key-file` refuses to replace a value that does not open with the key ("with the wrong key file, it
    /// would be lost for good"). A file larger than the tool reads (a program may raise `maximumValueSize`) does not
    /// open either: it must be refused too, not replaced unread.
    @Test func setWithAKeyFileDoesNotReplaceAFileTooLargeToOpen() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            let keyFile = root.appendingPathComponent("storage.key")
            try Data((try WLStorageEncryptionKey.random().base64EncodedSecret + "\n").utf8).write(to: keyFile)
            #expect(chmod(keyFile.path, 0o600) == 0)
            // An encrypted value of another program, under another key, larger than 16 MiB + the sealing overhead
            // (sparse: it costs no disk).
            let other = try WLStorageEncryptionKey.random()
            let sealedStore = WLStorageEncryptedStore(.directory(store), key: other)
            try sealedStore.write(key: "big", data: Data("1".utf8))
            let file = store.appendingPathComponent("big")
            let handle = try FileHandle(forWritingTo: file)
            try handle.truncate(atOffset: UInt64(ValueSizeLimit.sealedMaximum + 4096))
            try handle.close()
            let sizeBefore = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int

            let set = try await runTool(["--dir", store.path, "--key-file", keyFile.path, "set", "big", "2"], in: root)
            let sizeAfter = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int
            #expect(set.status == 1, "set replaced a file it could not open: \(set.stderr)")
            #expect(sizeAfter == sizeBefore, "the file was replaced: \(sizeBefore ?? -1) -> \(sizeAfter ?? -1) bytes")
        }
    }
}
