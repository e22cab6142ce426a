// A store of a program's own can be written against the public API alone, with exactly-once updates and a feed that
// carries its changes: the test stores that the update tests (VersionedMemoryStore) and the carried-change tests
// (CarryingMemoryStore) use are type-checked outside the package, where `package` declarations are not seen, as a
// reader's program would be.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct PublicStoreContractTests {
    @Test(
        .enabled(if: ExampleCompiler.canRun, ExampleCompiler.missingModulesReason),
        arguments: [
            "Tests/WLStorageTests/Helpers/VersionedMemoryStore.swift",
            "Tests/WLStorageTests/Helpers/CarryingMemoryStore.swift",
        ])
    func aStoreOfTheTestsCompilesAgainstThePublicAPIAlone(storeFile: String) async throws {
        let lines = try String(contentsOf: packageDirectory.appendingPathComponent(storeFile), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let program = ExampleProgram(
            document: storeFile, blocks: [ExampleBlock(line: 1, code: lines, prelude: [], preludeLine: 1)])
        try await withTemporaryDirectory { directory in
            let compiler = try ExampleCompiler(workDirectory: directory)
            let failure = await compiler.compiled([program]).first ?? "not compiled"
            #expect(failure == nil, "\(storeFile) does not compile outside the package:\n\(failure ?? "")")
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
