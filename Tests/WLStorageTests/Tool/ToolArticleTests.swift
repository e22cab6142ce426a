import Foundation
import Testing
import WLStorage

/// The article on the tool shows commands that work: each `$ ` line of its `sh` blocks is run, in order, by bash in a
/// home directory of the test's own, and prints what the article shows after it.
@Suite(.capturingOutput) struct ToolArticleTests {
    /// One `$ ` line of the article, and the lines shown under it.
    struct Step {
        var line: Int
        var command: String
        var output: [String]
    }

    static func steps(of text: String) -> [Step] {
        var steps: [Step] = []
        var inShell = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("```") {
                inShell = line == "```sh"
            } else if inShell, line.hasPrefix("$ ") {
                steps.append(Step(line: index + 1, command: String(line.dropFirst(2)), output: []))
            } else if inShell, !steps.isEmpty {
                steps[steps.count - 1].output.append(String(line))
            }
        }
        return steps
    }

    @Test func everyCommandOfTheArticleRunsAndPrintsWhatItShows() async throws {
        let article = packageDirectory.appendingPathComponent("Docs/WLStorage.docc/UsingTheWlstorageTool.md")
        let steps = Self.steps(of: try String(contentsOf: article, encoding: .utf8))
        #expect(steps.count >= 10)
        try await withTemporaryDirectory { root in
            // The article's reader is Ada, and the debug build of myapp has kept a cursor.
            let home = root.appendingPathComponent("home/ada")
            let debugFolder = home.appendingPathComponent(".local/share/myapp/.wlstorage_debug")
            try FileManager.default.createDirectory(at: debugFolder, withIntermediateDirectories: true)
            try Data("42".utf8).write(to: debugFolder.appendingPathComponent("cursor"))
            for step in steps {
                let run = try await ToolRun.run(
                    ["-c", step.command], executable: URL(fileURLWithPath: "/bin/bash"),
                    environment: [
                        "PATH": ToolRun.tool.deletingLastPathComponent().path + ":/usr/bin:/bin", "HOME": home.path,
                    ],
                    in: home)
                // What the article shows: paths under /home/ada, and the same time for every file.
                func shown(_ text: String) -> [String] {
                    text.replacingOccurrences(of: root.path, with: "")
                        .replacing(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/, with: "2026-06-01T09:30:00Z")
                        .split(separator: "\n").map(String.init)
                }
                #expect(
                    (shown(run.stdout) + shown(run.stderr)).sorted() == step.output.sorted(),
                    "line \(step.line): \(step.command)")
            }
        }
    }
}
