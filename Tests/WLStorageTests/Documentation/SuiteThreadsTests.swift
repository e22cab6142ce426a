// Every suite of the test targets runs its tests on threads of their own (`.onTestThreads`, or `.capturingOutput`,
// which includes it): a suite without it would wait on the concurrency pool's threads and hold them while it waits.
import Foundation
import Testing
import WLStorageTestSupport

@Suite(.onTestThreads) struct SuiteThreadsTests {
    /// The test files of the test targets, as paths relative to the package.
    static func testFiles() -> [String] {
        let tests = packageDirectory.appendingPathComponent("Tests")
        let files = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil)?.compactMap { item in
            (item as? URL).flatMap { $0.pathExtension == "swift" ? $0.path : nil }
        }
        return (files ?? []).filter { !$0.contains("/WLStorageTestSupport/") }.sorted()
    }

    /// The suites of `text` that run without the trait: a `@Suite` attribute at the start of a line (to the line where
    /// its parentheses close) that names neither trait, and a type named `…Tests` at the start of a line with no
    /// attribute before it.
    static func suitesWithoutTheTrait(in text: String) -> [String] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var without: [String] = []
        var index = 0
        var afterAttribute = false
        while index < lines.count {
            let line = lines[index]
            let start = index
            index += 1
            if line.hasPrefix("@Suite") {
                var attribute = line
                while attribute.count(of: "(") > attribute.count(of: ")"), index < lines.count {
                    attribute += lines[index]
                    index += 1
                }
                afterAttribute = true
                if !attribute.contains(".onTestThreads") && !attribute.contains(".capturingOutput") {
                    without.append("line \(start + 1): \(attribute)")
                }
                continue
            }
            let isType = ["struct ", "final class ", "enum "].contains { line.hasPrefix($0) }
            if isType && line.contains("Tests") && !afterAttribute {
                without.append("line \(start + 1): \(line)")
            }
            afterAttribute = afterAttribute && line.hasPrefix("@")
        }
        return without
    }

    @Test func everySuiteDeclaredAtTheStartOfALineRunsOnTestThreads() throws {
        let files = Self.testFiles()
        #expect(files.count >= 200, "found \(files.count) test files; the search no longer finds them")
        var without: [String] = []
        for path in files {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            guard text.contains("@Test") else { continue }
            without += Self.suitesWithoutTheTrait(in: text).map { "\(path): \($0)" }
        }
        #expect(
            without.isEmpty,
            "suites without `.onTestThreads` or `.capturingOutput`:\n\(without.joined(separator: "\n"))")
    }

    /// No test flushes every storage of the test process (`WLStorageSystem.flushAll()`): it would write the storages of
    /// the tests running beside, which may keep a change pending on purpose (a program with the wrong key whose set must
    /// wait until it hears the value it cannot open). Tests flush their own stores' storages (`flushAllStores`); child
    /// programs, which are processes of their own, may call it.
    @Test func noTestFlushesTheStoragesOfTheTestsBesideIt() throws {
        let call = "WLStorageSystem" + ".flushAll()"  // in two parts, so this file does not hold the call it looks for
        let callers = try Self.testFiles().filter { path in
            try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").contains { line in
                line.contains(call) && !line.trimmingCharacters(in: .whitespaces).hasPrefix("//")
            }
        }
        #expect(callers.isEmpty, "tests that flush every storage of the test process: \(callers)")
    }

    /// The search finds a suite without the trait, over several lines too, and a test type with no attribute.
    @Test func theSearchFindsSuitesWithoutTheTrait() {
        let text = """
            @Suite(.serialized) struct ATests {}
            @Suite(
                .serialized,
                .enabled(if: true))
            struct BTests {}
            @Suite(
                .capturingOutput)
            struct CTests {}
            struct DTests {}
            @Suite(.onTestThreads) struct ETests {}
            """
        #expect(Self.suitesWithoutTheTrait(in: text).map { $0.prefix(7) } == ["line 1:", "line 2:", "line 9:"])
    }
}

extension String {
    fileprivate func count(of character: Character) -> Int { filter { $0 == character }.count }
}
