import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The directory the tool works on: a missing one, and the library's default when `--dir` is not given.
@Suite(.capturingOutput) struct ToolDirectoryTests {
    @Test func setCreatesAMissingStorageDirectoryWithMode0700AndSaysSo() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let first = try await ToolRun.run(["--dir", store.path, "set", "cursor", "1"], in: root)
            #expect(first.status == 0)
            #expect(first.stderr == "wlstorage: created the storage directory \(store.path)\n")
            #expect(mode(of: store) == 0o700)
            #expect(entries(of: store) == ["cursor"])

            let second = try await ToolRun.run(["--dir", store.path, "set", "cursor", "2"], in: root)
            #expect(second.status == 0)
            #expect(second.stderr.isEmpty)
        }
    }

    @Test(arguments: [["set", "cursor", "1"], ["watch", "cursor"]])
    func aMissingParentOfTheStorageDirectoryIsAnErrorAndNothingIsCreated(command: [String]) async throws {
        try await withTemporaryDirectory { root in
            let parent = root.appendingPathComponent("nonexistent")
            let store = parent.appendingPathComponent("dir")
            let run = try await ToolRun.run(["--dir", store.path] + command, in: root)
            #expect(run.status == 1)
            #expect(run.stdout.isEmpty)
            #expect(
                run.stderr
                    == "wlstorage: cannot create the storage directory \(store.path): its parent directory "
                    + "\(parent.path) does not exist\n")
            #expect(!FileManager.default.fileExists(atPath: parent.path))
        }
    }

    @Test func setIntoAPathThatIsAFileIsAnError() async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent("file")
            try Data("x".utf8).write(to: file)
            let set = try await ToolRun.run(["--dir", file.path, "set", "cursor", "1"], in: root)
            #expect(set.status == 1)
            #expect(set.stderr == "wlstorage: the storage directory path is not a directory: \(file.path)\n")
        }
    }

    @Test(arguments: [["get", "k"], ["rm", "k"], ["list"], ["verify"]])
    func aCommandOnAMissingDirectorySaysTheDirectoryIsMissing(command: [String]) async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let run = try await ToolRun.run(["--dir", store.path] + command, in: root)
            #expect(run.status == 1)
            #expect(run.stdout.isEmpty)
            #expect(run.stderr == "wlstorage: no storage directory at \(store.path)\n")
            #expect(!FileManager.default.fileExists(atPath: store.path))
        }
    }

    @Test func pathOnAMissingDirectoryPrintsThePathAndSaysTheDirectoryIsMissing() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let path = try await ToolRun.run(["--dir", store.path, "path", "k"], in: root)
            #expect(path.status == 0)
            #expect(path.stdout == store.appendingPathComponent("k").path + "\n")
            #expect(path.stderr == "wlstorage: note: no storage directory at \(store.path)\n")
            #expect(!FileManager.default.fileExists(atPath: store.path))
        }
    }

    @Test func watchCreatesAMissingStorageDirectoryAndSaysSo() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            let watch = try ToolRun(["--dir", store.path, "watch", "--count", "2", "k"], in: root)
            #expect(await watch.waitForLines(["(missing)"]))
            #expect(mode(of: store) == 0o700)
            #expect(try await ToolRun.run(["--dir", store.path, "set", "k", "1"], in: root).status == 0)
            let result = await watch.finish()
            #expect(result.status == 0)
            #expect(result.stderr == "wlstorage: created the storage directory \(store.path)\n")
        }
    }

    @Test func withProgramAMissingProgramFolderIsAnErrorAndNothingIsCreated() async throws {
        try await withTemporaryDirectory { root in
            let data = root.appendingPathComponent("data")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: false)
            let set = try await ToolRun.run(
                ["--program", "myapp", "set", "k", "1"], environment: ["XDG_DATA_HOME": data.path], in: root)
            #expect(set.status == 1)
            #expect(set.stderr.contains("its parent directory \(data.path)/myapp does not exist"))
            #expect(entries(of: data).isEmpty)
        }
    }

    @Test(arguments: [["get", "k"], ["list"], ["rm", "k"], ["verify"], ["set", "k", "1"], ["watch", "k"]])
    func withProgramAndOnlyTheDebugBuildsFolderTheErrorSaysPassDebug(command: [String]) async throws {
        try await withTemporaryDirectory { root in
            let program = root.appendingPathComponent("data/myapp")
            let debug = program.appendingPathComponent(".wlstorage_debug")
            try FileManager.default.createDirectory(at: debug, withIntermediateDirectories: true)
            let run = try await ToolRun.run(
                ["--program", "myapp"] + command,
                environment: ["XDG_DATA_HOME": root.appendingPathComponent("data").path],
                in: root)
            #expect(run.status == 1)
            #expect(
                run.stderr
                    == "wlstorage: no storage directory at \(program.path)/.wlstorage; the debug build of 'myapp' keeps"
                    + " its values in \(debug.path): pass --debug\n")
            #expect(entries(of: program) == [".wlstorage_debug"])
        }
    }

    @Test(arguments: [["get", "k"], ["list"], ["set", "k", "1"]])
    func withDebugAndOnlyTheReleaseBuildsFolderTheErrorSaysLeaveOutDebug(command: [String]) async throws {
        try await withTemporaryDirectory { root in
            let program = root.appendingPathComponent("data/myapp")
            let release = program.appendingPathComponent(".wlstorage")
            try FileManager.default.createDirectory(at: release, withIntermediateDirectories: true)
            let run = try await ToolRun.run(
                ["--program", "myapp", "--debug"] + command,
                environment: ["XDG_DATA_HOME": root.appendingPathComponent("data").path], in: root)
            #expect(run.status == 1)
            #expect(
                run.stderr
                    == "wlstorage: no storage directory at \(program.path)/.wlstorage_debug; the release build of 'myapp'"
                    + " keeps its values in \(release.path): leave out --debug\n")
            #expect(entries(of: program) == [".wlstorage"])
        }
    }

    @Test func pathWithOnlyTheOtherBuildsFolderPrintsThePathAndSaysWhichOptionToChange() async throws {
        try await withTemporaryDirectory { root in
            let program = root.appendingPathComponent("data/myapp")
            try FileManager.default.createDirectory(
                at: program.appendingPathComponent(".wlstorage_debug"), withIntermediateDirectories: true)
            let path = try await ToolRun.run(
                ["--program", "myapp", "path", "k"],
                environment: ["XDG_DATA_HOME": root.appendingPathComponent("data").path],
                in: root)
            #expect(path.status == 0)
            #expect(path.stdout == program.appendingPathComponent(".wlstorage/k").path + "\n")
            #expect(path.stderr.hasPrefix("wlstorage: note: no storage directory at "))
            #expect(path.stderr.hasSuffix(": pass --debug\n"))
        }
    }

    @Test(arguments: DefaultDirectoryCase.all)
    func withoutDirTheLibrarysDefaultDirectoryIsUsed(example: DefaultDirectoryCase) async throws {
        try await withTemporaryDirectory { root in
            let environment = example.environment.mapValues { $0.replacingOccurrences(of: "ROOT", with: root.path) }
            let expected = root.appendingPathComponent(example.expectedFile).path
            // The tool creates the storage directory, not its parents.
            try FileManager.default.createDirectory(
                at: URL(fileURLWithPath: expected).deletingLastPathComponent().deletingLastPathComponent(),
                withIntermediateDirectories: true)

            let set = try await ToolRun.run(example.options + ["set", "k", "7"], environment: environment, in: root)
            #expect(set.status == 0)
            #expect(FileManager.default.contents(atPath: expected) == Data("7".utf8))

            let path = try await ToolRun.run(example.options + ["path", "k"], environment: environment, in: root)
            #expect(path.stdout == expected + "\n")
        }
    }
}

extension ToolDirectoryTests {
    /// directory. `ROOT` in the environment stands for the test's directory.
    struct DefaultDirectoryCase: Sendable, CustomTestStringConvertible {
        var options: [String]
        var environment: [String: String]
        var expectedFile: String

        var testDescription: String { "\(options) \(environment.keys.sorted())" }

        static let all = [
            DefaultDirectoryCase(
                options: ["--program", "myapp"], environment: ["XDG_DATA_HOME": "ROOT/data", "HOME": "ROOT/home"],
                expectedFile: "data/myapp/.wlstorage/k"),
            DefaultDirectoryCase(
                options: ["--program", "myapp", "--debug"], environment: ["XDG_DATA_HOME": "ROOT/data"],
                expectedFile: "data/myapp/.wlstorage_debug/k"),
            DefaultDirectoryCase(
                options: ["--program", "myapp"], environment: ["HOME": "ROOT/home"],
                expectedFile: "home/.local/share/myapp/.wlstorage/k"),
            DefaultDirectoryCase(
                options: ["--program", "myapp"],
                environment: ["WLSTORAGE_DIRECTORY": "ROOT/override", "XDG_DATA_HOME": "ROOT/data"],
                expectedFile: "override/k"),
            DefaultDirectoryCase(
                options: [], environment: ["WLSTORAGE_DIRECTORY": "ROOT/override"], expectedFile: "override/k"),
        ]
    }
}
