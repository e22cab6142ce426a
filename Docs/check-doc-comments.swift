// Fails when a public symbol of the documented module has no `///` comment.
//
// Run by Docs/build.sh on the symbol graphs it extracts (with synthesized members skipped, so only symbols
// declared in the package are checked):
//
//   swift Docs/check-doc-comments.swift Docs/.build/symbol-graphs
//
// Prints one `error:` line per undocumented symbol, with its file and line, and exits 1 if there is any.

import Foundation

struct SymbolGraph: Decodable {
    struct Symbol: Decodable {
        struct Names: Decodable {
            let title: String
        }
        struct Kind: Decodable {
            let displayName: String
        }
        struct DocComment: Decodable {
            struct Line: Decodable {
                let text: String
            }
            let lines: [Line]
        }
        struct Location: Decodable {
            struct Position: Decodable {
                let line: Int
            }
            let uri: String
            let position: Position
        }

        let pathComponents: [String]
        let kind: Kind
        let accessLevel: String
        let docComment: DocComment?
        let location: Location?
    }

    let symbols: [Symbol]
}

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: swift check-doc-comments.swift SYMBOL-GRAPH-DIRECTORY\n".utf8))
    exit(2)
}
let directory = URL(fileURLWithPath: CommandLine.arguments[1], isDirectory: true)
let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
    .filter { $0.lastPathComponent.hasSuffix(".symbols.json") }
    .sorted { $0.lastPathComponent < $1.lastPathComponent }
guard !files.isEmpty else {
    print("error: no symbol graph in \(directory.path)")
    exit(1)
}

var checked = 0
var undocumented = 0
for file in files {
    let graph = try JSONDecoder().decode(SymbolGraph.self, from: Data(contentsOf: file))
    for symbol in graph.symbols where symbol.accessLevel == "public" || symbol.accessLevel == "open" {
        checked += 1
        let text = symbol.docComment?.lines.map(\.text).joined().trimmingCharacters(in: .whitespaces) ?? ""
        guard text.isEmpty else { continue }
        undocumented += 1
        var place = ""
        if let location = symbol.location {
            let path = URL(string: location.uri)?.path ?? location.uri
            place = "\(path):\(location.position.line + 1): "
        }
        let name = symbol.pathComponents.joined(separator: ".")
        print("\(place)error: \(symbol.kind.displayName) \(name) has no doc comment")
    }
}

if undocumented > 0 {
    print("error: \(undocumented) of \(checked) public symbols have no doc comment")
    exit(1)
}
print("all \(checked) public symbols have a doc comment")
