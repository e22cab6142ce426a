import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `wlstorage watch`: the value, then each change, until a count, a signal or the directory's removal ends it.
@Suite(.capturingOutput) struct ToolWatchTests {
    @Test func watchPrintsTheCurrentValueThenEachNewDistinctValue() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let watch = try ToolRun(["--dir", store.path, "watch", "--count", "4", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))

            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)
            #expect(await watch.waitForLines(["(missing)", "1"]))

            // The same value again is not printed; a write by the library itself is.
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", " 1 "], in: root).status == 0)
            try WLStorageDefaultBacker<[String: Int]>(key: "k", directory: store).write(value: ["a": 2])
            #expect(await watch.waitForLines(["(missing)", "1", #"{"a":2}"#]))

            #expect(try await ToolRun.run(["--dir", store.path, "rm", "k"], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stdout == "(missing)\n1\n{\"a\":2}\n(missing)\n")
        }
    }

    @Test func watchWithACountOfTwoExitsAfterOneChange() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", #"{"v":1}"#], in: root).status == 0)
            let watch = try ToolRun(["--dir", store.path, "watch", "a/b", "--count=2"], in: root)
            #expect(await watch.waitForLines([#"{"v":1}"#]))
            #expect(try await ToolRun.run(["--dir", store.path, "set", "a/b", #"{"v": 2}"#], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stdout == "{\"v\":1}\n{\"v\":2}\n")
        }
    }

    @Test func watchReportsAValueTheLibraryCannotDecodeAndDoesNotPrintIt() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)
            let watch = try ToolRun(["--dir", store.path, "watch", "--count", "2", "k"], in: root)
            #expect(await watch.waitForLines(["1"]))
            try Data("[1e400]".utf8).write(to: store.appendingPathComponent("k"))
            #expect(await watch.waitForError { $0.contains("Number 1e400 is not representable in Swift") })
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "2"], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stdout == "1\n2\n")
        }
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func watchEndsByTheSignalThatInterruptsIt(signal: Int32) async throws {
        try await withTemporaryDirectory { root in
            let watch = try ToolRun(["--dir", root.appendingPathComponent("store").path, "watch", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))
            watch.send(signal)
            let result = await watch.finish()
            #expect(result.signaled)
            #expect(result.status == signal)
        }
    }

    @Test func watchExitsWithOneWhenItsDirectoryIsRemoved() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let watch = try ToolRun(["--dir", store.path, "watch", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))
            try FileManager.default.removeItem(at: store)
            let result = await watch.finish()
            #expect(result.status == 1)
            #expect(!result.signaled)
            #expect(result.stderr.contains("removed or moved"))
        }
    }
}
