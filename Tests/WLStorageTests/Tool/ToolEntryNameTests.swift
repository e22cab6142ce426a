import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Names of entries as the tool prints them: escaped, and reported even when they are not UTF-8.
@Suite(.capturingOutput) struct ToolEntryNameTests {
    @Test func listPrintsEachNameOnOneLineWithControlCharactersAndInvalidUTF8Escaped() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "plain", "1"], in: root).status == 0)
            let names: [(bytes: [UInt8], printed: String)] = [
                (Array("esc\u{1b}[31mred".utf8), #"esc\x1b[31mred"#),
                (Array("forged  -  0  2024-01-01T00:00:00Z  json\nplain2".utf8), "forged  -  0"),
                (Array("two\nlines".utf8), #"two\nlines"#),
                (Array("bad".utf8) + [0xFF, 0xFE], #"bad\xff\xfe"#),
                (Array("tab\tand\\back".utf8), #"tab\tand\\back"#),
                (Array("del\u{7f}".utf8), #"del\x7f"#),
                (Array("rtl\u{202e}txt".utf8), #"rtl\xe2\x80\xaetxt"#),
                (Array("héllo-ключ".utf8), "héllo-ключ"),
            ]
            for name in names { try createFile(named: name.bytes, in: store, contents: Array("1".utf8)) }

            let list = try await ToolRun.run(["--dir", store.path, "list"], in: root)
            #expect(list.status == 0)
            #expect(!list.stdout.utf8.contains(0x1B))
            let lines = list.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(lines.count == 1 + 1 + names.count)  // the header, "plain", one line per name
            #expect(lines.filter { $0.hasPrefix("plain ") }.count == 1)
            for name in names {
                let line = try #require(lines.first { $0.hasPrefix(name.printed) }, "\(name.printed)")
                let columns = line.split(separator: " ", omittingEmptySubsequences: true)
                #expect(columns.dropFirst().first == "-", "no key maps to \(name.printed)")
                #expect(columns.last == "other", "\(name.printed)")
            }
            #expect(!lines.contains { $0.hasPrefix("plain2") })
        }
    }

    @Test func verifyReportsANameThatIsNotUTF8InsteadOfSkippingIt() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            #expect(try await ToolRun.run(["--dir", store.path, "set", "good", "1"], in: root).status == 0)
            try createFile(named: Array("good".utf8) + [0xFF, 0xFE], in: store, contents: Array("2".utf8))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(
                verify.stdout.contains(#"bad: good\xff\xfe: not a file the library writes (its name is not UTF-8)"#))
            #expect(verify.stdout.hasSuffix(": 1 problem\n"))
        }
    }

    @Test func verifyEscapesTheNamesItReports() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            try createFile(named: Array("x\ny\u{1b}".utf8), in: store, contents: Array("{".utf8))

            let verify = try await ToolRun.run(["--dir", store.path, "verify"], in: root)
            #expect(verify.status == 1)
            #expect(!verify.stdout.utf8.contains(0x1B))
            let bad = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("bad: ") }
            #expect(bad == [#"bad: x\ny\x1b: not a file the library writes (no key maps to this name)"#])
        }
    }
}

/// Creates a file whose name is `name`, bytes that need not be UTF-8, in `directory`, which is created if needed.
private func createFile(named name: [UInt8], in directory: URL, contents: [UInt8]) throws {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let path = Array(directory.path.utf8) + [UInt8(ascii: "/")] + name + [0]
    let fd = path.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) {
            open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        }
    }
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    let written = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == contents.count else { throw POSIXError(.EIO) }
}
