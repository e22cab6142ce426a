import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Files too large to be a value, and files that are not regular: reported without being read.
@Suite(.capturingOutput) struct ToolValueSizeTests {
    /// A sparse file of 1 TiB takes no disk; read whole, it would take 1 TiB of memory.
    @Test func listVerifyAndGetReportAFileLargerThanTheMaximumValueSizeWithoutReadingIt() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "good", "1"], in: root).status == 0)
            let huge = store.appendingPathComponent("huge")
            let truncate = try await ToolRun.run(
                ["-s", "1T", huge.path], executable: URL(fileURLWithPath: "/usr/bin/truncate"), in: root)
            try #require(truncate.status == 0)
            let limit = ValueSizeLimit.defaultMaximum

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            let row = list.stdout.split(separator: "\n").first { $0.hasPrefix("huge ") }
            #expect(row?.hasSuffix(" too large") == true)
            #expect(row?.contains(" 1099511627776 ") == true)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(
                verify.stdout.contains(
                    "bad: huge: larger than the maximum value size the library reads (\(limit) bytes)\n"))
            #expect(verify.stdout.hasSuffix("2 key files checked in \(store.path): 1 problem\n"))

            let get = try await ToolRun.run(["--dir", store.path, "get", "huge"], in: root)
            #expect(get.status == 1)
            #expect(!get.signaled)
            #expect(get.stdout.isEmpty)
            #expect(
                get.stderr
                    == "wlstorage: the file of 'huge' is larger than the maximum value size the library reads "
                    + "(\(limit) bytes): \(huge.path)\n")
        }
    }

    @Test func aFileOfExactlyTheMaximumValueSizeIsCheckedAndOneByteMoreIsTooLarge() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            let limit = ValueSizeLimit.defaultMaximum
            var text = [UInt8](repeating: UInt8(ascii: "a"), count: limit)
            text[0] = UInt8(ascii: "\"")
            text[limit - 1] = UInt8(ascii: "\"")
            try Data(text).write(to: store.appendingPathComponent("full"))
            try Data(text + [UInt8(ascii: " ")]).write(to: store.appendingPathComponent("over"))
            text[limit / 2] = 0x01
            try Data(text).write(to: store.appendingPathComponent("full-bad"))

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            let rows = list.stdout.split(separator: "\n")
            #expect(rows.first { $0.hasPrefix("full ") }?.hasSuffix(" json") == true)
            #expect(rows.first { $0.hasPrefix("full-bad ") }?.hasSuffix(" invalid JSON") == true)
            #expect(rows.first { $0.hasPrefix("over ") }?.hasSuffix(" too large") == true)

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            let bad = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("bad: ") }
            #expect(
                bad == [
                    "bad: full-bad: does not hold JSON: Unescaped control character around character \(limit / 2)",
                    "bad: over: larger than the maximum value size the library reads (\(limit) bytes)",
                ])
        }
    }

    @Test func aFIFOIsReportedWithoutBeingOpenedForLongOrRead() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            try #require(mkfifo(store.appendingPathComponent("pipe").path, 0o600) == 0)

            let get = try await ToolRun.run(["--dir", store.path, "get", "pipe"], in: root)
            #expect(get.status == 1)
            #expect(get.stderr.contains("special file"))
            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.stdout.split(separator: "\n").last?.hasSuffix(" special file") == true)
            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.stdout.contains("bad: pipe: not a regular file (special file)"))
        }
    }
}
