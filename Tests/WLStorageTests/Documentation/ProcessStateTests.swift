// The package keeps its process state in one object, the runtime: a static property of any other type that holds a
// lock, an atomic, a queue or a shared instance is a second home for state, which this test refuses.
import Foundation
import Testing
import WLStorageCrypto
import WLStorageTestSupport

@Suite(.onTestThreads) struct ProcessStateTests {
    /// The stored static properties that may hold state: the runtime itself, the file layer's, which cannot see the
    /// runtime above it, and libcrypto's start and calls in flight, one per process.
    static let allowed: Set<String> = [
        "WLStorage/Process/Runtime.swift: shared", "WLStorageFiles/FileSystemState.swift: shared",
        "WLStorageCrypto/OpenSSLLibrary.swift: shared",
    ]

    /// Stored statics whose type or initializer is one of state: a lock, an atomic, a mutex, a queue, an instance
    /// made by a call, or a value made by a closure run once; in every library target.
    static func statefulStatics() throws -> Set<String> {
        let root = packageDirectory.appendingPathComponent("Sources")
        let files = try [
            "WLStorageCore", "WLStorageJSON", "WLStorageCrypto", "WLStorageFiles", "WLStorage", "WLStoragePostgres",
            "WLStorageEtcd",
        ].flatMap {
            target in
            try FileManager.default.subpathsOfDirectory(atPath: root.appendingPathComponent(target).path)
                .filter { $0.hasSuffix(".swift") }.map { "\(target)/\($0)" }
        }
        let declaration = try Regex(
            #"^\s*(?:@\w+\s+)*(?:[\w()]+\s+)*static\s+(?:let|var)\s+(\w+)\s*(?::\s*([^=]+?))?\s*=\s*(.*)$"#)
        var found: Set<String> = []
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                guard !line.contains("///"), !line.contains("@TaskLocal"),
                    let match = try declaration.wholeMatch(in: String(line))
                else { continue }
                let name = match.output[1].substring.map(String.init) ?? ""
                let type = match.output[2].substring.map(String.init) ?? ""
                let value = match.output[3].substring.map(String.init) ?? ""
                let stateful =
                    ["Lock", "Atomic", "Mutex", "DispatchQueue"].contains { type.contains($0) || value.contains($0) }
                    || value.hasSuffix("{") || value.range(of: #"^[A-Z]\w*\(\)$"#, options: .regularExpression) != nil
                if stateful { found.insert("\(file): \(name)") }
            }
        }
        return found
    }

    @Test func theRuntimeIsTheOneHomeOfProcessState() throws {
        let found = try Self.statefulStatics()
        #expect(
            found.contains("WLStorage/Process/Runtime.swift: shared"),
            "the pattern no longer finds the runtime: \(found)")
        let others = found.subtracting(Self.allowed).subtracting(Self.constants)
        #expect(others.isEmpty, "static properties that hold state outside the runtime: \(others.sorted())")
    }

    /// Statics that the pattern finds but that hold no state: made once and never changed.
    static let constants: Set<String> = [
        // Foundation's coders with the package's settings, never changed after they are made.
        "WLStorageJSON/JSONCoders.swift: encoder", "WLStorageJSON/JSONCoders.swift: decoder",
        // The etcd store's coder and decoder of its messages, likewise.
        "WLStorageEtcd/EtcdMessages.swift: etcd",
        // ThreadSanitizer's hooks, looked up once.
        "WLStorageCore/Lock.swift: active",
    ]
}
