import Foundation
import Testing
import WLStorage
import WLStorageTestSupport

@testable import WLStoragePostgres

/// `wlstorage --postgres URL [--namespace NS]`: the tool on the rows of a PostgreSQL store.
@Suite(.onTestThreads, .enabled(if: PostgresCluster.shouldRun, PostgresCluster.skipReason))
struct PostgresToolTests {
    private struct Run {
        var status: Int32
        var output: String
        var errors: String
    }

    /// Runs the tool to its end, with a generous bound.
    private func run(_ arguments: [String]) throws -> Run {
        let child = try ChildProcess("wlstorage", arguments)
        let end = child.waitForExit(timeout: 60)
        return Run(status: end?.status ?? -1, output: child.printed, errors: child.printedErrors)
    }

    private func start(_ arguments: [String]) throws -> (
        process: Process, output: CapturedOutput, errors: CapturedOutput
    ) {
        let process = Process()
        process.executableURL = builtProductsDirectory.appendingPathComponent("wlstorage")
        process.arguments = arguments
        let output = try CapturedOutput()
        let errors = try CapturedOutput()
        process.standardOutput = output.handle
        process.standardError = errors.handle
        try process.run()
        return (process, output, errors)
    }

    @Test func setGetListAndRemoveWorkOnTheStoresRows() throws {
        ReportedErrors.install()
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let storage = WLStorage(key: "limit", defaultValue: [String: Int](), flushInterval: nil, store: store)

        let set = try run(["--postgres", url, "--namespace", namespace, "set", "limit", #"{ "max" : 5 }"#])
        #expect(set.status == 0, "\(set.errors)")
        #expect(try store.read(key: "limit") == Data(#"{"max":5}"#.utf8))
        // A running program picks up what the tool writes.
        #expect(eventually(timeout: 30) { storage.wrappedValue == ["max": 5] })

        let get = try run(["--postgres", url, "--namespace", namespace, "get", "limit"])
        #expect(get.status == 0)
        #expect(get.output.contains(#""max""#) && get.output.contains("5"))

        try store.write(key: "other", data: Data("1".utf8))
        try store.write(key: "text", data: Data("not json".utf8))
        let list = try run(["--postgres", url, "--namespace", namespace, "list"])
        // The columns of a directory's list: key, size, when written (UTC), state.
        let lines = list.output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(lines.map { $0.first } == ["KEY", "limit", "other", "text"])
        #expect(lines.first == ["KEY", "SIZE", "MODIFIED", "STATE"])
        #expect(lines.dropFirst().map { $0[1] } == ["9", "1", "8"])
        #expect(lines.dropFirst().map { $0.dropFirst(3).joined(separator: " ") } == ["json", "json", "invalid JSON"])
        let written = try #require(lines.last?[2])
        #expect(written.count == 20 && written.hasSuffix("Z") && written.dropFirst(10).first == "T", "\(written)")
        try store.remove(key: "text")

        let remove = try run(["--postgres", url, "--namespace", namespace, "rm", "other"])
        #expect(remove.status == 0)
        #expect(try store.read(key: "other") == nil)
        let again = try run(["--postgres", url, "--namespace", namespace, "rm", "other"])
        #expect(again.status == 1)
        #expect(again.errors.contains("no value stored for 'other'"))

        let missing = try run(["--postgres", url, "--namespace", namespace, "get", "nothing"])
        #expect(missing.status == 1)
        let notJSON = try run(["--postgres", url, "--namespace", namespace, "set", "k", "{nope"])
        #expect(notJSON.status == 1)
        #expect(try store.read(key: "k") == nil)
    }

    @Test func listAndGetWithKeysShowTheRowsOfThoseKeysAndSayWhichHaveNone() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        try store.write(key: "a/b", data: Data("1".utf8))
        try store.write(key: "plain", data: Data(#""x""#.utf8))
        try store.write(key: "other", data: Data("2".utf8))

        let list = try run(["--postgres", url, "--namespace", namespace, "list", "plain", "absent", "a/b"])
        #expect(list.status == 1)
        let rows = list.output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        try #require(rows.map { $0.first } == ["KEY", "plain", "absent", "a/b"])
        #expect(rows[2].dropFirst() == ["-", "-", "no", "value", "(no", "row)"])
        #expect(rows[3].last == "json")

        let get = try run(["--postgres", url, "--namespace", namespace, "get", "plain", "absent", "a/b"])
        #expect(get.status == 1)
        #expect(get.output == "plain: \"x\"\na/b: 1\n")
        #expect(get.errors.contains("no value stored for 'absent'"))

        let all = try run(["--postgres", url, "--namespace", namespace, "list"])
        #expect(all.status == 0)
        #expect(all.output.split(separator: "\n").map { $0.prefix { $0 != " " } } == ["KEY", "a/b", "other", "plain"])
    }

    @Test func verifyChecksEveryRowOfTheNamespace() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        try store.write(key: "good", data: Data("1".utf8))
        try store.write(key: "text", data: Data("not json".utf8))
        let bad = try run(["--postgres", url, "--namespace", namespace, "verify"])
        #expect(bad.status == 1)
        #expect(bad.output.contains("bad: text: does not hold JSON"), "\(bad.output)")
        #expect(bad.output.hasSuffix("2 rows checked in \(store.identity): 1 problem\n"), "\(bad.output)")
        try store.remove(key: "text")
        let good = try run(["--postgres", url, "--namespace", namespace, "verify"])
        #expect(good.status == 0, "\(good.output)")
        #expect(good.output == "1 row checked in \(store.identity): no problems\n")
    }

    @Test func aValueThatIsNotJSONSuggestsSetStringWithoutShowingTheConnectionString() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let set = try run(["--postgres", url, "--namespace", namespace, "set", "k", "hello"])
        #expect(set.status == 1)
        #expect(
            set.errors.hasSuffix(
                "To store it as a JSON string, type: wlstorage --postgres URL --namespace '\(namespace)' set k --string hello\n"
            ), "\(set.errors)")
        #expect(!set.errors.contains(url))
    }

    @Test func anUnreachableServerIsNamedOnceAndItsCauseSaidOnce() throws {
        // Nothing listens on port 1.
        let url = "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=5"
        let list = try run(["--postgres", url, "list"])
        #expect(list.status == 1)
        #expect(list.errors.components(separatedBy: "Connection refused").count == 2, "\(list.errors)")
        #expect(list.errors.components(separatedBy: "127.0.0.1:1/postgres").count == 2, "\(list.errors)")
        #expect(!list.errors.contains("\t"), "\(list.errors)")

        // The library's description of the error says the cause once too.
        let store = try WLStoragePostgresStore(url: url, timeout: .seconds(5))
        let error = try #require(throws: WLStorageError.self) { try store.read(key: "k") }
        #expect(String(describing: error).components(separatedBy: "Connection refused").count == 2, "\(error)")
    }

    @Test func withoutAKeyFileASealedRowIsLeftAndItsKeyNamed() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let key = try WLStorageEncryptionKey.random()
        try WLStorageEncryptedStore(store, key: key).write(key: "api", data: Data(#""s3cr3t""#.utf8))
        let sealed = try #require(try store.read(key: "api"))
        let fingerprint = String(key.description.dropFirst("WLStorageEncryptionKey(fingerprint: ".count).dropLast())
        for command in [["set", "api", "1"], ["rm", "api"], ["get", "api"]] {
            let run = try run(["--postgres", url, "--namespace", namespace] + command)
            #expect(run.status == 1, "\(command)")
            #expect(run.errors.contains("sealed with key \(fingerprint)"), "\(command): \(run.errors)")
            #expect(run.errors.contains("pass --key-file"), "\(command): \(run.errors)")
            #expect(try store.read(key: "api") == sealed, "\(command)")
        }
    }

    @Test func fileCommandsBadURLsAndMixedOptionsAreUsageErrorsWithoutThePassword() throws {
        let url = try PostgresCluster.shared().url
        let path = try run(["--postgres", url, "path", "k"])
        #expect(path.status == 64)
        let mixed = try run(["--postgres", url, "--dir", "/tmp", "list"])
        #expect(mixed.status == 64)
        let lonely = try run(["--namespace", "x", "--dir", "/tmp", "list"])
        #expect(lonely.status == 64)
        // A URL libpq cannot parse is a usage error; a server that cannot be reached is a failure. Neither shows the
        // password.
        let bad = try run(["--postgres", "postgresql://app:s3cret%zz@localhost/db", "list"])
        #expect(bad.status == 64)
        #expect(!bad.errors.isEmpty)
        #expect(!(bad.errors + bad.output).contains("s3cret"))
        let unreachable = try run(["--postgres", "postgresql://app:s3cret@127.0.0.1:1/db?connect_timeout=2", "list"])
        #expect(unreachable.status == 1)
        #expect(!unreachable.errors.isEmpty)
        #expect(!(unreachable.errors + unreachable.output).contains("s3cret"))
    }

    @Test func theConnectionStringCanComeFromTheEnvironmentOrAFileSoThatNoPasswordShowsInTheProcessList() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("wls-url-\(UUID().uuidString)")
        try Data((url + "\n").utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let set = try run(["--postgres", "file:\(file.path)", "--namespace", namespace, "set", "limit", "5"])
        #expect(set.status == 0, "\(set.errors)")
        #expect(try store.read(key: "limit") == Data("5".utf8))

        // A variable of this test's own, which the tool inherits.
        let name = "WLSTORAGE_TEST_URL_\(UInt32.random(in: 0...UInt32.max))"
        setenv(name, url, 1)
        defer { unsetenv(name) }
        let get = try run(["--postgres", "env:\(name)", "--namespace", namespace, "get", "limit"])
        #expect(get.status == 0, "\(get.errors)")
        #expect(get.output == "5\n")

        let unset = try run(["--postgres", "env:\(name)_UNSET", "get", "limit"])
        #expect(unset.status == 64)
        #expect(unset.errors.contains("\(name)_UNSET is not set"))
        let missing = try run(["--postgres", "file:\(file.path).missing", "get", "limit"])
        #expect(missing.status == 64)
        #expect(missing.errors.contains("cannot be read"))
    }

    @Test func watchPrintsTheValueThenEachChangeAnotherProgramMakes() throws {
        let url = try PostgresCluster.shared().url
        let namespace = uniqueNamespace()
        let store = try WLStoragePostgresStore(url: url, namespace: namespace)
        try store.write(key: "mode", data: Data(#""a""#.utf8))
        let watch = try start(["--postgres", url, "--namespace", namespace, "watch", "mode", "--count", "3"])
        defer { if watch.process.end == nil { watch.process.terminate() } }
        #expect(eventually(timeout: 30) { watch.output.text == "\"a\"\n" })
        try store.write(key: "other", data: Data("1".utf8))  // another key: nothing printed
        try store.write(key: "mode", data: Data(#""b""#.utf8))
        #expect(eventually(timeout: 30) { watch.output.text == "\"a\"\n\"b\"\n" })
        try store.remove(key: "mode")
        #expect(eventually(timeout: 30) { watch.process.end != nil })
        #expect(watch.output.text == "\"a\"\n\"b\"\n(missing)\n")
        #expect(watch.process.end?.status == 0)
    }
}
