import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `wlstorage --etcd ENDPOINTS [--namespace NS]`: the tool on the keys of an etcd store, as on a PostgreSQL store's
/// rows.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdToolTests {
    private struct Run {
        var status: Int32
        var output: String
        var errors: String
    }

    /// Runs the tool to its end, with a generous bound.
    private func run(_ arguments: [String]) throws -> Run {
        let child = try ChildProcess("wlstorage", arguments, unsetting: ["WLSTORAGE_DIRECTORY"])
        let end = child.waitForExit(timeout: 60)
        return Run(status: end?.status ?? -1, output: child.printed, errors: child.printedErrors)
    }

    private func store(_ namespace: String) throws -> WLStorageEtcdStore {
        try WLStorageEtcdStore(endpoints: [try EtcdServer.shared().endpoint], namespace: namespace)
    }

    /// A key file of a new key, readable by its owner only; removed with `directory`.
    private func keyFile(in directory: URL) throws -> (url: URL, key: WLStorageEncryptionKey) {
        let key = try WLStorageEncryptionKey.random()
        let url = directory.appendingPathComponent("storage.key")
        try Data((key.base64EncodedSecret + "\n").utf8).write(to: url)
        try #require(chmod(url.path, 0o600) == 0)
        return (url, key)
    }

    @Test func setGetListVerifyAndRemoveWorkOnTheNamespacesKeys() throws {
        ReportedErrors.install()
        let server = try EtcdServer.shared()
        let namespace = uniqueNamespace()
        let store = try store(namespace)
        let tool = ["--etcd", server.endpoint, "--namespace", namespace]
        // A program of another identity (another spelling of the endpoint), which hears the tool's write.
        let program = try WLStorageEtcdStore(endpoints: [server.otherSpelling], namespace: namespace)
        let storage = WLStorage(key: "limit", defaultValue: [String: Int](), flushInterval: nil, store: program)

        let set = try run(tool + ["set", "limit", #"{ "max" : 5 }"#])
        #expect(set.status == 0, "\(set.errors)")
        #expect(try store.read(key: "limit") == bytes(#"{"max":5}"#))
        #expect(eventually(timeout: 60) { storage.wrappedValue == ["max": 5] }, "a running program hears the tool")

        let get = try run(tool + ["get", "limit"])
        #expect(get.status == 0, "\(get.errors)")
        #expect(get.output.contains(#""max""#) && get.output.contains("5"))

        try store.write(key: "a/b", data: bytes("1"))
        try store.write(key: "text", data: bytes("not json"))
        let list = try run(tool + ["list"])
        #expect(list.status == 0, "\(list.errors)")
        let lines = list.output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(lines.map { $0.first } == ["KEY", "a/b", "limit", "text"])
        #expect(lines.first == ["KEY", "SIZE", "REVISION", "STATE"])
        #expect(lines.dropFirst().map { $0[1] } == ["1", "9", "8"])
        #expect(lines.dropFirst().map { $0.dropFirst(3).joined(separator: " ") } == ["json", "json", "invalid JSON"])
        // Each key's revision, in the order the keys were written.
        let revisions = lines.dropFirst().compactMap { Int64($0[2]) }
        #expect(revisions.count == 3 && revisions[1] < revisions[0] && revisions[0] < revisions[2], "\(lines)")

        let listed = try run(tool + ["list", "text", "absent"])
        #expect(listed.status == 1)
        #expect(listed.output.split(separator: "\n").last?.hasSuffix("no value (no key)") == true, "\(listed.output)")

        let bad = try run(tool + ["verify"])
        #expect(bad.status == 1)
        #expect(bad.output.contains("bad: text: does not hold JSON"), "\(bad.output)")
        #expect(bad.output.hasSuffix("3 keys checked in \(store.identity): 1 problem\n"), "\(bad.output)")

        let remove = try run(tool + ["rm", "text"])
        #expect(remove.status == 0, "\(remove.errors)")
        #expect(try store.read(key: "text") == nil)
        let again = try run(tool + ["rm", "text"])
        #expect(again.status == 1)
        #expect(again.errors.contains("no value stored for 'text'"), "\(again.errors)")
        let good = try run(tool + ["verify"])
        #expect(good.status == 0, "\(good.output)")
        #expect(good.output == "2 keys checked in \(store.identity): no problems\n")

        let missing = try run(tool + ["get", "nothing"])
        #expect(missing.status == 1)
        #expect(missing.errors.contains("no value stored for 'nothing'"), "\(missing.errors)")
        let notJSON = try run(tool + ["set", "k", "{nope"])
        #expect(notJSON.status == 1)
        #expect(notJSON.errors.contains("--etcd \(server.endpoint) --namespace"), "\(notJSON.errors)")
        #expect(try store.read(key: "k") == nil)
        withExtendedLifetime(storage) {}
    }

    @Test func withAKeyFileTheValuesAreSealedAndOpenedAndWithoutOneASealedValueIsLeft() throws {
        try withTemporaryDirectory { directory in
            let server = try EtcdServer.shared()
            let namespace = uniqueNamespace()
            let store = try store(namespace)
            let (url, key) = try keyFile(in: directory)
            let tool = ["--etcd", server.endpoint, "--namespace", namespace]
            let sealedTool = tool + ["--key-file", url.path]

            let set = try run(sealedTool + ["set", "api", #""s3cr3t""#])
            #expect(set.status == 0, "\(set.errors)")
            let sealed = try #require(try store.read(key: "api"))
            #expect(!String(decoding: sealed, as: UTF8.self).contains("s3cr3t"), "the value is stored sealed")
            #expect(try WLStorageEncryptedStore(store, key: key).read(key: "api") == bytes(#""s3cr3t""#))

            let get = try run(sealedTool + ["get", "api"])
            #expect(get.status == 0, "\(get.errors)")
            #expect(get.output == "\"s3cr3t\"\n")
            let list = try run(sealedTool + ["list"])
            #expect(list.output.split(separator: "\n").last?.hasSuffix("encrypted") == true, "\(list.output)")
            let verify = try run(sealedTool + ["verify"])
            #expect(verify.status == 0, "\(verify.output)")

            // Without the key file: nothing replaced, nothing removed, and the key that sealed it named.
            let fingerprint = String(key.description.dropFirst("WLStorageEncryptionKey(fingerprint: ".count).dropLast())
            for command in [["set", "api", "1"], ["rm", "api"], ["get", "api"]] {
                let plain = try run(tool + command)
                #expect(plain.status == 1, "\(command)")
                #expect(plain.errors.contains("sealed with key \(fingerprint)"), "\(command): \(plain.errors)")
                #expect(try store.read(key: "api") == sealed, "\(command)")
            }
            let plainVerify = try run(tool + ["verify"])
            #expect(plainVerify.status == 1)
            #expect(plainVerify.output.contains("bad: api: sealed with key \(fingerprint)"), "\(plainVerify.output)")

            // With the key file, a value stored plain is named as such.
            try store.write(key: "plain", data: bytes("1"))
            let mixed = try run(sealedTool + ["verify"])
            #expect(mixed.status == 1)
            #expect(mixed.output.contains("bad: plain: not encrypted"), "\(mixed.output)")

            let remove = try run(sealedTool + ["rm", "api"])
            #expect(remove.status == 0, "\(remove.errors)")
            #expect(try store.read(key: "api") == nil)
        }
    }

    @Test func watchPrintsTheValueThenEachChangeAnotherProgramMakes() throws {
        let server = try EtcdServer.shared()
        let namespace = uniqueNamespace()
        let store = try store(namespace)
        try store.write(key: "mode", data: bytes(#""a""#))
        let watch = try ChildProcess(
            "wlstorage", ["--etcd", server.endpoint, "--namespace", namespace, "watch", "mode", "--count", "3"])
        defer { if watch.process.end == nil { watch.send(SIGKILL) } }
        #expect(eventually(timeout: 60) { watch.printed == "\"a\"\n" }, "\(watch.printedErrors)")
        // The watch may not be made yet: once it is, it reports every key, and the tool reads the value again.
        try store.write(key: "other", data: bytes("1"))  // another key: nothing printed
        try store.write(key: "mode", data: bytes(#""b""#))
        #expect(eventually(timeout: 60) { watch.printed == "\"a\"\n\"b\"\n" }, "\(watch.printedErrors)")
        try store.remove(key: "mode")
        #expect(watch.waitForExit(timeout: 60)?.status == 0, "\(watch.printedErrors)")
        #expect(watch.printed == "\"a\"\n\"b\"\n(missing)\n")
    }

    @Test func combinationsThatMakeNoSenseAreUsageErrors() throws {
        let endpoint = try EtcdServer.shared().endpoint
        let cases: [[String]] = [
            ["--etcd", endpoint, "--postgres", "host=x", "list"],
            ["--etcd", endpoint, "--dir", "/tmp", "list"],
            ["--program", "p", "--etcd", endpoint, "list"],
            ["--etcd", endpoint, "path", "k"],
            ["--etcd", "\(endpoint),,\(endpoint)", "list"],
            ["--etcd", "", "list"],
            ["--etcd", "ftp://127.0.0.1:2379", "list"],
            ["--etcd", "http://user:s3cret@127.0.0.1:2379", "list"],
            ["--etcd", "\(endpoint)/v3", "list"],
            ["--namespace", "x", "list"],
        ]
        for arguments in cases {
            let run = try run(arguments)
            #expect(run.status == 64, "\(arguments): \(run.errors)")
            #expect(!run.errors.isEmpty, "\(arguments)")
            #expect(!run.errors.contains("s3cret"), "\(arguments): \(run.errors)")
        }
        let help = try run(["--help"])
        #expect(help.output.contains("--etcd ENDPOINTS"))
    }

    @Test func anUnreachableClusterIsAFailureThatNamesIt() throws {
        // Nothing listens on port 1.
        let list = try run(["--etcd", "http://127.0.0.1:1", "list"])
        #expect(list.status == 1)
        #expect(list.errors.contains("http://127.0.0.1:1"), "\(list.errors)")
        #expect(list.errors.contains("no endpoint answered"), "\(list.errors)")
    }
}
