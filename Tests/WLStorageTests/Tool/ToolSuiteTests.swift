import Foundation
import Testing
import WLStorage
import WLStorageCrypto
import WLStorageFiles

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `wlstorage --suite NAME`: the directory the library's `.suite(NAME)` names, as a user runs the tool.
@Suite(.capturingOutput)
struct ToolSuiteTests {
    /// A plain name is its own folder; a name that is not, and a plain name in the form of a hashed folder, are
    /// `suite-` and their SHA-256.
    @Test(arguments: ["com.example.shared", "my suite/with a slash", "suite-" + String(repeating: "ab", count: 32)])
    func theSuiteOptionUsesTheLibrarysFolderUnderARelativeSuitesDirectory(name: String) async throws {
        try await withTemporaryDirectory { root in
            // Relative, as a user types it: taken from the current directory, the test's directory here.
            let environment = ["WLSTORAGE_SUITES_DIRECTORY": "suites"]
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent("suites"), withIntermediateDirectories: true)
            let library = try #require(
                StorageLocation.suiteDirectory(
                    name, environment: ["WLSTORAGE_SUITES_DIRECTORY": root.appendingPathComponent("suites").path]))
            let folder =
                FileName.isPlain(name) && !name.hasPrefix("suite-") ? name : "suite-" + SHA256.hexDigest(of: name)!
            #expect(library.lastPathComponent == folder)

            let set = try await ToolRun.run(["--suite", name, "set", "k", "7"], environment: environment, in: root)
            #expect(set.status == 0, "\(set.stderr)")
            #expect(FileManager.default.contents(atPath: library.appendingPathComponent("k").path) == Data("7".utf8))
            let path = try await ToolRun.run(["--suite", name, "path", "k"], environment: environment, in: root)
            #expect(path.stdout == library.appendingPathComponent("k").path + "\n")

            // What the tool wrote, a storage of the suite reads.
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: .directory(library))
            #expect(storage.wrappedValue == 7)
        }
    }

    @Test func withoutASuitesDirectoryTheSuiteIsUnderTheDataHome() async throws {
        try await withTemporaryDirectory { root in
            let suites = root.appendingPathComponent("data/wlstorage/suites")
            try FileManager.default.createDirectory(at: suites, withIntermediateDirectories: true)
            let run = try await ToolRun.run(
                ["--suite", "tools", "set", "k", "\"x\""], environment: ["XDG_DATA_HOME": root.path + "/data"],
                in: root)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(FileManager.default.contents(atPath: suites.path + "/tools/k") == Data("\"x\"".utf8))
        }
    }

    @Test(arguments: [
        ["--suite", "s", "--dir", "d", "list"], ["--suite", "s", "--program", "p", "list"],
        ["--suite", "s", "--debug", "list"], ["--suite", "s", "--postgres", "host=x", "list"], ["--suite"],
    ])
    func theSuiteOptionWithAnotherDirectoryIsAUsageError(arguments: [String]) async throws {
        try await withTemporaryDirectory { root in
            let run = try await ToolRun.run(arguments, in: root)
            #expect(run.status == 64)
            #expect(run.stderr.contains("--suite") || run.stderr.contains("needs a value"), "\(run.stderr)")
        }
    }
}
