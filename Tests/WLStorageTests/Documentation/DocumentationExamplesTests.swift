// Every Swift code block of README.md and of the DocC catalog (Docs/WLStorage.docc, every .md in it) compiles as
// shown, where a reader would put it.
//
// How a block is compiled:
//
// - A ```swift block is a program of its own: the `main.swift` of an executable target that depends on WLStorage, so
//   its statements are top-level code. It is type-checked with `swiftc -typecheck` against the WLStorage module that
//   `swift test` built, in the Swift 6 language mode, with DEBUG defined (the debug build a reader starts with), and
//   with warnings as errors.
// - A block whose first line is `// swift-tools-version:…` is a package manifest, type-checked against the toolchain's
//   PackageDescription. A block with an `@main` type is a file of a program whose entry point it declares.
// - An HTML comment on the line just above the opening fence says otherwise. Markdown renderers (GitHub, DocC) do not
//   show it:
//
//       <!-- example: continues -->      The block continues the program of the previous compiled block of the same
//                                        document, as a reader adds it to the same file: it is compiled after it.
//       <!-- example: fragment, WHY -->  The block is not compiled; WHY says what it needs that the test cannot have,
//                                        such as another package.
//       <!-- example: standalone -->     The default, written out when the comment has a prelude.
//
//   Lines after the comment's first line, up to `-->`, are a prelude: declarations of the reader's own that the block
//   uses without showing them (a logger, a function that redraws), compiled before the block:
//
//       <!-- example: continues
//       func apply(_ settings: UserSettings) {}
//       -->
//
// A block that does not compile fails the test with the document, the line and the compiler's message: each block is
// compiled under a `#sourceLocation` that points into its document. The programs are compiled in parallel, one
// `swiftc` each.
//
// The WLStorage module is the one built with the test bundle: in the `Modules` folder next to it (SwiftPM), or in that
// folder itself, or else in the package's `.build/debug`. When it is in none of them, the tests are skipped and say
// why; with `CI=true` in the environment they run and fail instead, so that CI never passes without them.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct DocumentationExamplesTests {
    @Test(.enabled(if: ExampleCompiler.canRun, ExampleCompiler.missingModulesReason))
    func everySwiftBlockOfTheReadmeAndTheArticlesCompiles() async throws {
        let documents = try ExampleDocument.all()
        #expect(documents.map(\.path).contains("README.md"))
        var programs: [ExampleProgram] = []
        for document in documents {
            let parsed = document.programs()
            for problem in parsed.problems { Issue.record(Comment(rawValue: problem)) }
            programs += parsed.programs
        }
        #expect(programs.contains { $0.document == "README.md" })
        try await withTemporaryDirectory { directory in
            let compiler = try ExampleCompiler(workDirectory: directory)
            for (program, failure) in zip(programs, await compiler.compiled(programs)) {
                guard let failure else { continue }
                Issue.record(Comment(rawValue: "\(program.title) does not compile:\n\(failure)"))
            }
        }
    }

    /// The harness itself: the README's first example as it was, a property wrapper in top-level code, fails with the
    /// compiler's message at the document's line.
    @Test(.enabled(if: ExampleCompiler.canRun, ExampleCompiler.missingModulesReason))
    func aBlockThatDoesNotCompileFailsWithItsDocumentLineAndMessage() async throws {
        let document = ExampleDocument(
            path: "Example.md",
            text: """
                # Example

                ```swift
                import WLStorage

                @WLStorage(key: "first_name", defaultValue: nil)
                var firstName: String?
                ```
                """)
        let parsed = document.programs()
        #expect(parsed.problems.isEmpty)
        try #require(parsed.programs.count == 1)
        try await withTemporaryDirectory { directory in
            let compiler = try ExampleCompiler(workDirectory: directory)
            let failure = try #require(await compiler.compiled(parsed.programs).first)
            let message = try #require(failure)
            #expect(
                message.contains("Example.md:6:1: error: property wrappers are not yet supported in top-level code"))
        }
    }

    @Test func markersContinueAProgramAddAPreludeOrLeaveAFragmentOut() {
        let document = ExampleDocument(
            path: "Doc.md",
            text: """
                ```swift
                let a = 1
                ```
                <!-- example: continues
                func use(_ value: Int) {}
                -->
                ```swift
                use(a)
                ```
                <!-- example: fragment, needs another package -->
                ```swift
                import Elsewhere
                ```
                ```swift
                // swift-tools-version:6.0
                ```
                ```sh
                swift build
                ```
                <!-- example: sideways -->
                ```swift
                let b = 2
                ```
                <!-- example: continues -->
                Some text between.
                """)
        let parsed = document.programs()
        #expect(parsed.programs.count == 2)
        #expect(parsed.programs.first?.blocks.map(\.line) == [2, 8])
        #expect(parsed.programs.first?.blocks.last?.prelude == ["func use(_ value: Int) {}"])
        #expect(parsed.programs.first?.blocks.last?.preludeLine == 5)
        #expect(parsed.programs.last?.isManifest == true)
        #expect(parsed.programs.last?.toolsVersion == "6.0")
        #expect(
            parsed.problems == [
                "Doc.md:20: unknown example marker 'sideways' (standalone, continues or fragment)",
                "Doc.md:24: an example marker must be followed by a ```swift block",
            ])
    }
}

// MARK: - Documents and their blocks

/// A Markdown document of the package, and the Swift blocks in it.
struct ExampleDocument {
    /// The path from the package's root, as messages show it.
    let path: String
    let text: String

    /// README.md and every Markdown file of the DocC catalog, in a stable order.
    static func all() throws -> [ExampleDocument] {
        let catalog = "Docs/WLStorage.docc"
        var paths = ["README.md"]
        let walker = FileManager.default.enumerator(atPath: packageDirectory.appendingPathComponent(catalog).path)
        while let relative = walker?.nextObject() as? String {
            if relative.hasSuffix(".md") { paths.append(catalog + "/" + relative) }
        }
        return try paths.sorted().map { path in
            ExampleDocument(
                path: path, text: try String(contentsOf: packageDirectory.appendingPathComponent(path), encoding: .utf8)
            )
        }
    }

    /// The programs its Swift blocks make, and what is wrong with its markers.
    func programs() -> (programs: [ExampleProgram], problems: [String]) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var programs: [ExampleProgram] = []
        var problems: [String] = []
        var marker: (kind: String, prelude: [String], line: Int)?
        var index = 0
        while index < lines.count {
            let line = lines[index]
            if line.hasPrefix("<!-- example:") {
                if let marker {
                    problems.append("\(path):\(marker.line): an example marker must be followed by a ```swift block")
                }
                let start = index
                var words = String(line.dropFirst("<!-- example:".count))
                var prelude: [String] = []
                if let end = words.range(of: "-->") {
                    words = String(words[..<end.lowerBound])
                } else {
                    index += 1
                    while index < lines.count, !lines[index].hasPrefix("-->") {
                        prelude.append(lines[index])
                        index += 1
                    }
                }
                marker = (words.trimmingCharacters(in: .whitespaces), prelude, start + 1)
                index += 1
                continue
            }
            guard line.hasPrefix("```") else {
                if let pending = marker {
                    problems.append("\(path):\(pending.line): an example marker must be followed by a ```swift block")
                    marker = nil
                }
                index += 1
                continue
            }
            // A fenced block: collect it up to its closing fence.
            let language = line.dropFirst(3).trimmingCharacters(in: .whitespaces)
            let firstLine = index + 2
            var code: [String] = []
            index += 1
            while index < lines.count, lines[index] != "```" {
                code.append(lines[index])
                index += 1
            }
            index += 1
            let blockMarker = marker
            marker = nil
            guard language == "swift" else {
                if let blockMarker {
                    problems.append(
                        "\(path):\(blockMarker.line): an example marker must be followed by a ```swift block")
                }
                continue
            }
            let kindWord = blockMarker.map { String($0.kind.prefix { $0 != "," }) } ?? "standalone"
            let block = ExampleBlock(
                line: firstLine, code: code, prelude: blockMarker?.prelude ?? [],
                preludeLine: (blockMarker?.line ?? 0) + 1)
            switch kindWord {
            case "fragment":
                continue
            case "continues":
                guard let last = programs.last, !last.isManifest else {
                    problems.append("\(path):\(blockMarker!.line): 'continues' follows no compiled Swift program")
                    continue
                }
                programs[programs.count - 1].blocks.append(block)
            case "standalone":
                programs.append(ExampleProgram(document: path, blocks: [block]))
            default:
                problems.append(
                    "\(path):\(blockMarker!.line): unknown example marker '\(kindWord)' (standalone, continues or fragment)"
                )
            }
        }
        if let marker {
            problems.append("\(path):\(marker.line): an example marker must be followed by a ```swift block")
        }
        return (programs, problems)
    }
}

/// One ```swift block: its code, from the document's line `line`, and the prelude of its marker.
struct ExampleBlock {
    let line: Int
    let code: [String]
    let prelude: [String]
    /// The document's line of the prelude's first line.
    let preludeLine: Int
}

/// The blocks that a reader puts in one file, in order.
struct ExampleProgram {
    let document: String
    var blocks: [ExampleBlock]

    /// Whether it is a package manifest: its first line names the tools version.
    var isManifest: Bool {
        blocks.first?.code.first?.hasPrefix("// swift-tools-version") == true
    }

    /// The tools version a manifest names, such as `6.0`.
    var toolsVersion: String? {
        guard isManifest, let first = blocks.first?.code.first, let colon = first.firstIndex(of: ":") else {
            return nil
        }
        return first[first.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }

    /// Whether a block declares the program's entry point with `@main`, so that the file is not a `main.swift`.
    var declaresMain: Bool {
        blocks.contains { $0.code.contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix("@main") } }
    }

    /// Where it is, for messages: the document and the line of each block.
    var title: String {
        "\(document), the example at line" + (blocks.count > 1 ? "s " : " ")
            + blocks.map { String($0.line) }.joined(separator: ", ")
    }

    /// The file to compile: each prelude and block under a `#sourceLocation` of its document's lines.
    var source: String {
        var text = ""
        for block in blocks {
            if !block.prelude.isEmpty {
                text += "#sourceLocation(file: \"\(document)\", line: \(block.preludeLine))\n"
                text += block.prelude.joined(separator: "\n") + "\n"
            }
            text += "#sourceLocation(file: \"\(document)\", line: \(block.line))\n"
            text += block.code.joined(separator: "\n") + "\n"
        }
        return text + "#sourceLocation()\n"
    }
}

// MARK: - Compiling

/// Type-checks example programs with the toolchain's `swiftc` against the modules that `swift test` built.
struct ExampleCompiler {
    /// The folders where the built WLStorage module is looked for, in order: the `Modules` folder next to the test
    /// bundle (where SwiftPM puts the modules of the build the bundle is part of), that folder itself, and the package's
    /// debug build folder (each once: `.build/debug` is usually a link to the folder of the test bundle).
    static let modulesCandidates: [URL] = {
        let debug = packageDirectory.appendingPathComponent(".build/debug").resolvingSymlinksInPath()
        var candidates: [URL] = []
        for folder in [builtProductsDirectory, debug] {
            for candidate in [folder.appendingPathComponent("Modules"), folder]
            where !candidates.contains(where: { $0.path == candidate.path }) {
                candidates.append(candidate)
            }
        }
        return candidates
    }()

    /// The first of ``modulesCandidates`` that holds `WLStorage.swiftmodule`; `nil` when none does.
    static let modulesDirectory: URL? = modulesCandidates.first { folder in
        FileManager.default.fileExists(atPath: folder.appendingPathComponent("WLStorage.swiftmodule").path)
    }

    /// Whether the environment says it is CI (`CI=true` or `CI=1`, as CI services set it).
    static let isCI: Bool = {
        let value = ProcessInfo.processInfo.environment["CI"]?.lowercased()
        return value == "true" || value == "1"
    }()

    /// Whether the tests that compile run: when the module is found, and always under CI, where a missing module fails
    /// them rather than skip them.
    static let canRun = modulesDirectory != nil || isCI

    static let missingModulesReason: Comment = Comment(
        rawValue: "the built WLStorage module is in none of "
            + modulesCandidates.map(\.path).joined(separator: ", ") + " (with CI=true this is a failure)")

    private let swiftc: URL
    private let workDirectory: URL
    private let moduleFlags: [String]

    init(workDirectory: URL) throws {
        guard let modules = Self.modulesDirectory else {
            throw ExampleCompilerError(
                "no built WLStorage module: WLStorage.swiftmodule is in none of "
                    + Self.modulesCandidates.map(\.path).joined(separator: ", "))
        }
        guard let swiftc = Self.executable(named: "swiftc") else {
            throw ExampleCompilerError("swiftc is not on PATH")
        }
        self.swiftc = swiftc
        self.workDirectory = workDirectory
        // WLStorage imports the C module CWLStorageOpenSSL internally; loading WLStorage needs its module map, and the
        // include paths of libcrypto that SwiftPM took from pkg-config.
        let moduleMap = packageDirectory.appendingPathComponent("Sources/CWLStorageOpenSSL/module.modulemap")
        var flags = ["-I", modules.path, "-Xcc", "-fmodule-map-file=\(moduleMap.path)"]
        if let pkgConfig = Self.executable(named: "pkg-config") {
            let result = try Self.run(
                pkgConfig, ["--cflags-only-I", "libcrypto"], in: workDirectory, name: "pkg-config")
            if result.status == 0 {
                for flag in result.output.split(whereSeparator: \.isWhitespace) { flags += ["-Xcc", String(flag)] }
            }
        }
        self.moduleFlags = flags
    }

    /// ``compile(_:)`` on a thread of its own, so that waiting for the compilers does not hold a thread of the test
    /// runner's pool.
    func compiled(_ programs: [ExampleProgram]) async -> [String?] {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: compile(programs)) }
        }
    }

    /// Type-checks each program, several at a time. Returns, for each, `nil` when it compiled, or what the compiler
    /// said.
    func compile(_ programs: [ExampleProgram]) -> [String?] {
        let results = Lock([String?](repeating: nil, count: programs.count))
        DispatchQueue.concurrentPerform(iterations: programs.count) { index in
            let failure: String?
            do {
                failure = try compile(programs[index], number: index)
            } catch {
                failure = "\(error)"
            }
            results.withLock { $0[index] = failure }
        }
        return results.withLock { $0 }
    }

    private func compile(_ program: ExampleProgram, number: Int) throws -> String? {
        let folder = workDirectory.appendingPathComponent("example-\(number)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent(
            program.isManifest ? "Package.swift" : program.declaresMain ? "Program.swift" : "main.swift")
        try program.source.write(to: file, atomically: false, encoding: .utf8)
        var arguments = [
            "-typecheck", "-warnings-as-errors", "-diagnostic-style", "llvm", "-module-cache-path",
            workDirectory.appendingPathComponent("module-cache").path,
        ]
        if let toolsVersion = program.toolsVersion {
            // swiftc is a link to the driver in the toolchain's bin folder; the manifest API is in its lib folder.
            let manifestAPI = swiftc.resolvingSymlinksInPath().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("lib/swift/pm/ManifestAPI")
            arguments += [
                "-swift-version", toolsVersion.hasPrefix("5") ? "5" : "6", "-I", manifestAPI.path,
                "-Xfrontend", "-package-description-version", "-Xfrontend", toolsVersion,
            ]
        } else {
            arguments += ["-swift-version", "6", "-D", "DEBUG", "-module-name", "Example"] + moduleFlags
            if program.declaresMain { arguments.append("-parse-as-library") }
        }
        let result = try Self.run(swiftc, arguments + [file.path], in: folder, name: "swiftc")
        guard result.status != 0 else { return nil }
        return "swiftc exited with status \(result.status):\n" + result.output
    }

    /// Runs `executable` to its end in `directory`, its standard output and error in one file there. Returns its exit
    /// status and what it printed.
    private static func run(
        _ executable: URL, _ arguments: [String], in directory: URL, name: String
    ) throws -> (status: Int32, output: String) {
        let outputFile = directory.appendingPathComponent("\(name).out")
        _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
        let output = try FileHandle(forWritingTo: outputFile)
        defer { try? output.close() }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let end = process.waitForEnd(timeout: 600)
        let text = String(decoding: FileManager.default.contents(atPath: outputFile.path) ?? Data(), as: UTF8.self)
        return (end?.status ?? -1, text)
    }

    /// The executable `name` in the first folder of `PATH` that has one. (Not resolved: swiftc is a link to a driver
    /// that acts by the name it is called by.)
    private static func executable(named name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}

struct ExampleCompilerError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
