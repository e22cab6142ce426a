import Foundation
import Testing
import WLStorage
import WLStorageFiles

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Temporary files in a storage directory: those of crashed writers are removed, those of writers at work and files
/// that only look like them are kept.
@Suite(.capturingOutput) struct ToolTemporaryFileTests {
    @Test func verifyRemovesATemporaryFileLeftByACrashedWriterAndPasses() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            // A writer that crashed leaves its temporary file, unlocked.
            try Data("[1, 2".utf8).write(to: store.appendingPathComponent("key~0123456789abcdef.tmp"))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)
            #expect(
                verify.stdout
                    == "note: key~0123456789abcdef.tmp: removed: the temporary file of a writer that crashed\n"
                    + "1 key file checked in \(store.path): no problems\n")
            #expect(entries(of: store) == ["key"])
        }
    }

    @Test func listAndSetRemoveTemporaryFilesLeftByCrashedWritersAndSaySo() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            try Data("[".utf8).write(to: store.appendingPathComponent("key~0123456789abcdef.tmp"))
            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(!list.stdout.contains("~"))
            #expect(
                list.stderr.contains("removed the temporary file of a writer that crashed: key~0123456789abcdef.tmp"))
            #expect(entries(of: store) == ["key"])

            try Data("[".utf8).write(to: store.appendingPathComponent("other~fedcba9876543210.tmp"))
            let set = try await ToolRun.run(["--dir", store.path, "set", "key", "2"], in: root)
            #expect(set.status == 0)
            #expect(
                set.stderr.contains("removed the temporary file of a writer that crashed: other~fedcba9876543210.tmp"))
            #expect(entries(of: store) == ["key"])
        }
    }

    @Test func aTemporaryFileOfAWriterAtWorkIsANoteNotAProblemAndStays() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            let temporary = store.appendingPathComponent("key~0123456789abcdef.tmp")
            try Data("[1, 2".utf8).write(to: temporary)
            let writer = try WriterLock(on: temporary)
            defer { writer.release() }

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)
            #expect(
                verify.stdout
                    == "note: key~0123456789abcdef.tmp: the temporary file of a writer at work; not checked\n"
                    + "1 key file checked in \(store.path): no problems\n")
            #expect(entries(of: store) == ["key", "key~0123456789abcdef.tmp"])
        }
    }

    /// A rewrite that crashed between the exchange of its file with the one in place and the exchange back left
    /// another program's value, stored meanwhile, under the exchange's name: list puts it back in place, as the
    /// rewrite would have, and says so.
    @Test func listPutsBackAValueThatACrashedRewriteDisplaced() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            // The rewrite's file is in place; what it expected stands apart, under a name that is no key's.
            try Data("0".utf8).write(to: store.appendingPathComponent("kept~expected"))
            let directory = StorageDirectory(path: store.path)
            let written = try #require(directory.status(of: "key")?.identity)
            let expected = try #require(directory.status(of: "kept~expected")?.identity)
            let name = StorageDirectory.exchangeName(for: "key", replacing: expected, with: written)
            try Data("2".utf8).write(to: store.appendingPathComponent(name))

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(list.stderr.contains("resolved the file of a rewrite that crashed during its exchange: \(name)"))
            #expect(entries(of: store) == ["kept~expected", "key"])
            let get = try await ToolRun.run(["--dir", store.path, "get", "key"], in: root)
            #expect(get.stdout == "2\n")
        }
    }

    /// The same rewrite's file holding the version it replaced, which verify removes, with a note.
    @Test func verifyRemovesTheVersionACrashedRewriteReplaced() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            let directory = StorageDirectory(path: store.path)
            let expected = try #require(directory.status(of: "key")?.identity)
            try Data("2".utf8).write(to: store.appendingPathComponent("kept~written"))
            let written = try #require(directory.status(of: "kept~written")?.identity)
            let name = StorageDirectory.exchangeName(for: "key", replacing: expected, with: written)
            #expect(rename(store.appendingPathComponent("key").path, store.appendingPathComponent(name).path) == 0)
            #expect(
                rename(store.appendingPathComponent("kept~written").path, store.appendingPathComponent("key").path)
                    == 0)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)
            #expect(
                verify.stdout
                    == "note: \(name): resolved: the file of a rewrite that crashed during its exchange (a value"
                    + " another program stored meanwhile is put back in place, anything else removed)\n"
                    + "1 key file checked in \(store.path): no problems\n")
            #expect(entries(of: store) == ["key"])
            #expect(FileManager.default.contents(atPath: store.appendingPathComponent("key").path) == Data("2".utf8))
        }
    }

    /// Only the writer's shape, `NAME~` and 16 lowercase hex digits and `.tmp`, is a temporary file; anything else
    /// with a `~` and `.tmp` is someone's file, which list, verify and set never remove.
    @Test(arguments: [
        "report~draft.tmp", "key~0123456789ABCDEF.tmp", "key~0123456789abcde.tmp", "~0123456789abcdef.tmp",
        "my key~0123456789abcdef.tmp", "key~0123456789abcdef.tmp.tmp", "key~0123456789abcdef0123456789abcdef.xchg",
        "key~0123456789ABCDEF-0123456789abcdef.xchg", "my key~0123456789abcdef-0123456789abcdef.xchg",
    ])
    func aFileThatIsNotInTheWritersShapeIsNeverRemoved(name: String) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "1"], in: root).status == 0)
            try Data("a draft".utf8).write(to: store.appendingPathComponent(name))

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            let row = list.stdout.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            #expect(row?.hasSuffix(" other") == true)
            #expect(row?.dropFirst(name.count).split(separator: " ").first == "-")
            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("bad: \(name): not a file the library writes (no key maps to this name)"))
            #expect(try await ToolRun.run(["--dir", store.path, "set", "key", "2"], in: root).status == 0)

            #expect(entries(of: store) == ["key", name].sorted())
            #expect(
                FileManager.default.contents(atPath: store.appendingPathComponent(name).path) == Data("a draft".utf8))
        }
    }

    /// A name such as `cursor.tmp` is not in the writers' shape: it is the file of the plain key `cursor.tmp`, which
    /// the library writes and reads, and which the tool lists, reads and checks as that key, and never removes.
    @Test func aKeyWhoseFileNameEndsInTmpIsAKeyLikeAnyOther() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            do {
                let storage = fileStorage("cursor.tmp", in: store, default: 0, flushInterval: nil)
                storage.wrappedValue = 42
                storage.flush()
                #expect(storage.lastError == nil)
            }
            #expect(entries(of: store) == ["cursor.tmp"])
            #expect(try await ToolRun.run(["--dir", store.path, "set", "other", "1"], in: root).status == 0)

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            let row = list.stdout.split(separator: "\n").first { $0.hasPrefix("cursor.tmp ") }
            #expect(row?.split(separator: " ").dropFirst().first == "cursor.tmp")
            #expect(row?.hasSuffix(" json") == true)
            let get = try await ToolRun.run(["--dir", store.path, "get", "cursor.tmp"], in: root)
            #expect(get.status == 0)
            #expect(get.stdout == "42\n")
            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 0)

            let reopened = fileStorage("cursor.tmp", in: store, default: 0, flushInterval: nil)
            #expect(reopened.wrappedValue == 42)
            #expect(entries(of: store) == ["cursor.tmp", "other"])
        }
    }

    /// A stray `cursor.tmp` that another program left, beside a crashed writer's `cursor~0123456789abcdef.tmp`: list
    /// shows the first as the key `cursor.tmp` and keeps it as it is, and removes the second.
    @Test func aStrayCursorTmpIsListedAsTheKeyCursorTmpAndKept() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: false)
            let stray = store.appendingPathComponent("cursor.tmp")
            try Data("7\n".utf8).write(to: stray)
            let crashed = store.appendingPathComponent("cursor~0123456789abcdef.tmp")
            try Data("[1".utf8).write(to: crashed)

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            let rows = list.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            let row = try #require(rows.first { $0.first == "cursor.tmp" }, "no row for cursor.tmp:\n\(list.stdout)")
            #expect(row.count == 5)
            #expect(row.dropFirst().first == "cursor.tmp")
            #expect(row.last == "json")
            #expect(!rows.contains { $0.first == crashed.lastPathComponent })
            #expect(
                list.stderr.contains(
                    "removed the temporary file of a writer that crashed: \(crashed.lastPathComponent)"))
            #expect(!list.stderr.contains("cursor.tmp"))
            #expect(entries(of: store) == ["cursor.tmp"])
            #expect(FileManager.default.contents(atPath: stray.path) == Data("7\n".utf8))

            let get = try await ToolRun.run(["--dir", store.path, "get", "cursor.tmp"], in: root)
            #expect(get.status == 0)
            #expect(get.stdout == "7\n")
        }
    }
}
