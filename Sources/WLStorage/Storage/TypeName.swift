/// A type's name as a user writes it, for messages: `[String: Int?]`, not `Swift.Dictionary<…>`. Standard library and
/// Foundation types lose their module; a program's types keep it, without a private type's `(unknown context …)`.
enum TypeName {
    static func of(_ type: Any.Type) -> String {
        let reflected = String(reflecting: type)
        var parser = Parser(Array(reflected))
        guard let name = parser.type(), parser.isAtEnd else { return reflected }
        return name
    }

    /// Reads the names `String(reflecting:)` writes: dotted names with generic arguments, tuples and functions.
    private struct Parser {
        private let characters: [Character]
        private var index = 0

        init(_ characters: [Character]) { self.characters = characters }

        var isAtEnd: Bool { index == characters.count }

        private var next: Character? { index < characters.count ? characters[index] : nil }

        private mutating func skip(_ text: String) -> Bool {
            let expected = Array(text)
            guard characters[index...].starts(with: expected) else { return false }
            index += expected.count
            return true
        }

        /// A type, or `nil` when the text is not one this parser knows.
        mutating func type() -> String? {
            let first = skip("(") ? list(closing: ")").map { "(" + $0.joined(separator: ", ") + ")" } : named()
            guard var result = first else { return nil }
            if skip(" -> ") {
                guard let returned = type() else { return nil }
                result += " -> " + returned
            }
            return result
        }

        /// Types separated by `, `, up to `closing`, which is read.
        private mutating func list(closing: String) -> [String]? {
            var elements: [String] = []
            if skip(closing) { return elements }
            while true {
                guard let element = type() else { return nil }
                elements.append(element)
                if skip(", ") { continue }
                return skip(closing) ? elements : nil
            }
        }

        /// A dotted name, each part with its generic arguments, written in the standard library's short forms.
        private mutating func named() -> String? {
            var parts: [(name: String, arguments: [String]?)] = []
            repeat {
                // A private or local type's context: its module alone names it.
                while skip("(unknown context at $") {
                    while let character = next, character != ")" { index += 1 }
                    guard skip(")"), skip(".") else { return nil }
                }
                let start = index
                while let character = next, !"<>(), .".contains(character) { index += 1 }
                guard index > start else { return nil }
                let name = String(characters[start..<index])
                var arguments: [String]?
                if skip("<") {
                    guard let list = list(closing: ">") else { return nil }
                    arguments = list
                }
                parts.append((name, arguments))
            } while skip(".")
            if ["Swift", "Foundation", "FoundationEssentials"].contains(parts.first?.name), parts.count > 1 {
                parts.removeFirst()
            }
            // The package's lower layer is seen through the module a program imports.
            if parts.first?.name == "WLStorageCore" { parts[0].name = "WLStorage" }
            if parts.count == 1, let arguments = parts[0].arguments {
                switch (parts[0].name, arguments.count) {
                case ("Optional", 1):
                    return arguments[0].contains(" -> ") ? "(\(arguments[0]))?" : arguments[0] + "?"
                case ("Array", 1): return "[\(arguments[0])]"
                case ("Dictionary", 2): return "[\(arguments[0]): \(arguments[1])]"
                default: break
                }
            }
            return parts.map { part in
                part.name + (part.arguments.map { "<" + $0.joined(separator: ", ") + ">" } ?? "")
            }.joined(separator: ".")
        }
    }
}
