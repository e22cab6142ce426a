// A store of a program's own can be written against the public API alone, with exactly-once updates: the test store
// that the update tests use (VersionedMemoryStore) is type-checked outside the package, where `package` declarations
// are not seen, as a reader's program would be.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct PublicStoreContractTests {
    static let storeFile = "Tests/WLStorageTests/Helpers/VersionedMemoryStore.swift"

    @Test(.enabled(if: ExampleCompiler.canRun, ExampleCompiler.missingModulesReason))
    func aVersionedStoreCompilesAgainstThePublicAPIAlone() async throws {
        let lines = try String(contentsOf: packageDirectory.appendingPathComponent(Self.storeFile), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let program = ExampleProgram(
            document: Self.storeFile, blocks: [ExampleBlock(line: 1, code: lines, prelude: [], preludeLine: 1)])
        try await withTemporaryDirectory { directory in
            let compiler = try ExampleCompiler(workDirectory: directory)
            let failure = await compiler.compiled([program]).first ?? "not compiled"
            #expect(failure == nil, "\(Self.storeFile) does not compile outside the package:\n\(failure ?? "")")
        }
    }

    /// The check itself sees no more than the public API: a use of a `package` declaration fails it.
    @Test(.enabled(if: ExampleCompiler.canRun, ExampleCompiler.missingModulesReason))
    func aUseOfAPackageDeclarationDoesNotCompileThere() async throws {
        let program = ExampleProgram(
            document: "Outside.swift",
            blocks: [
                ExampleBlock(
                    line: 1, code: ["import WLStorage", "_ = WLStorageWriteTag.random()"], prelude: [], preludeLine: 1)
            ])
        try await withTemporaryDirectory { directory in
            let compiler = try ExampleCompiler(workDirectory: directory)
            let failure = await compiler.compiled([program]).first ?? nil
            #expect(failure?.contains("random") == true, "compiled: \(failure ?? "no error")")
        }
    }
}
