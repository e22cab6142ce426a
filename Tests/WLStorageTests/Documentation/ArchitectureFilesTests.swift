// The architecture article names the source files each step goes through: every one it names exists, so that the
// article cannot keep naming files that moved or were removed.
import Foundation
import Testing
import WLStorageTestSupport

@Suite(.onTestThreads) struct ArchitectureFilesTests {
    static let article = "Docs/WLStorage.docc/Architecture.md"

    /// The paths in backquotes that end in `.swift`, as the article writes them: relative to `Sources/WLStorage`, or to
    /// `Sources` for another target's.
    static func namedFiles() throws -> [String] {
        let text = try String(contentsOf: packageDirectory.appendingPathComponent(article), encoding: .utf8)
        let pattern = try Regex(#"`([A-Za-z0-9_+/]+\.swift)`"#)
        return Set(text.matches(of: pattern).compactMap { $0.output[1].substring.map(String.init) }).sorted()
    }

    @Test func everySourceFileTheArchitectureArticleNamesExists() throws {
        let named = try Self.namedFiles()
        #expect(named.count >= 20, "the article names \(named.count) files; the pattern no longer finds them")
        let sources = packageDirectory.appendingPathComponent("Sources")
        let missing = named.filter { path in
            let candidates = [
                sources.appendingPathComponent("WLStorage/" + path), sources.appendingPathComponent(path),
            ]
            return !candidates.contains { FileManager.default.fileExists(atPath: $0.path) }
        }
        #expect(missing.isEmpty, "\(Self.article) names files that do not exist: \(missing)")
    }
}
