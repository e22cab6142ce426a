// The architecture article says the targets below `WLStorage` import only those below them. SwiftPM builds a target
// that imports a module it does not depend on when that module happens to be built first, so the build alone does not
// keep the rule: this test reads the imports of every source file of those targets.
import Foundation
import Testing
import WLStorageTestSupport

@Suite(.onTestThreads) struct LayerImportsTests {
    /// The package's own modules each lower target may import.
    static let allowed: [String: Set<String>] = [
        "WLStorageCore": [],
        "WLStorageJSON": [],
        "WLStorageCrypto": ["CWLStorageOpenSSL"],
        "WLStorageFiles": ["WLStorageCore", "WLStorageCrypto"],
    ]

    /// The package's modules that `target`'s source files import, by file.
    static func packageImports(of target: String) throws -> [String: Set<String>] {
        let directory = packageDirectory.appendingPathComponent("Sources/\(target)")
        let pattern = try Regex(#"^\s*(?:@\w+\s+)*import\s+(?:\w+\s+)?(\w+)"#)
        var found: [String: Set<String>] = [:]
        for file in try FileManager.default.subpathsOfDirectory(atPath: directory.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") {
                guard let match = try pattern.firstMatch(in: String(line)),
                    let module = match.output[1].substring.map(String.init),
                    module.hasPrefix("WLStorage")
                        || module.hasPrefix("CWLStorage")
                else { continue }
                found["\(target)/\(file)", default: []].insert(module)
            }
        }
        return found
    }

    @Test func theTargetsBelowTheFacadeImportOnlyTheTargetsBelowThem() throws {
        let files = try Self.packageImports(of: "WLStorageFiles")
        #expect(
            files.values.contains { $0.contains("WLStorageCore") },
            "the pattern no longer finds the file layer's imports: \(files)")
        for (target, allowed) in Self.allowed {
            for (file, modules) in try Self.packageImports(of: target) {
                #expect(modules.isSubset(of: allowed), "\(file) imports \(modules.subtracting(allowed).sorted())")
            }
        }
    }
}
