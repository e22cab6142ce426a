import Foundation

/// The added-fields step: a JSON object completed with the members it lacks from the default value's JSON, one at a
/// time where the decoder reports a key not found, until it decodes; stored members are copied byte for byte.
package enum JSONFill {
    private static let maximumAdded = 1_024

    /// Whether `encoded` keeps all members of `stored` (at every shared object depth; the first of a repeated name, as
    /// the decoder reads it), and any of them (at the top).
    package static func coverage(of stored: Data, in encoded: Data) -> (all: Bool, any: Bool) {
        guard let storedMembers = object(stored)?.members, let encodedMembers = object(encoded)?.members else {
            return (false, false)
        }
        let any = storedMembers.contains { member in encodedMembers.contains { $0.key == member.key } }
        return (keepsAll(storedMembers, encodedMembers), any)
    }

    private static func keepsAll(_ stored: [Member], _ encoded: [Member]) -> Bool {
        let byKey = Dictionary(encoded.map { ($0.key, $0) }) { _, last in last }
        return Dictionary(stored.map { ($0.key, $0) }) { first, _ in first }.values.allSatisfy { member in
            guard let kept = byKey[member.key] else { return false }
            if case .object(let inner, _) = member.value, case .object(let keptInner, _) = kept.value {
                return keepsAll(inner, keptInner)
            }
            return true
        }
    }

    /// The value of `type` from `data` (which threw `error`) with the members it needs from `defaults`, and its bytes;
    /// `nil` when one is not at the same place there. Only after a key not found: the text is JSON, as parsing needs.
    package static func filled<T: Decodable>(
        _ data: Data, failing error: any Error, from defaults: Data, as type: T.Type
    ) -> (value: T, bytes: Data)? {
        guard case DecodingError.keyNotFound(_, _) = error else { return nil }
        guard var bytes = object(data)?.bytes else { return nil }
        let model = [UInt8](defaults)
        var modelParser = Parser(bytes: model)
        guard let modelRoot = modelParser.parseValue(depth: 0) else { return nil }
        var failure = error
        for _ in 0..<maximumAdded {
            guard case DecodingError.keyNotFound(let key, let context) = failure else { return nil }
            let path = context.codingPath + [key]
            // A key inside an array has no counterpart in the default.
            guard path.allSatisfy({ $0.intValue == nil }) else { return nil }
            let names = path.map(\.stringValue)
            guard let member = member(at: names[...], in: modelRoot),
                let filled = inserting(member, from: model, at: names.dropLast(), into: bytes)
            else { return nil }
            bytes = filled
            do {
                return (try JSONCoders.decoder.decode(T.self, from: Data(bytes)), Data(bytes))
            } catch {
                failure = error
            }
        }
        return nil
    }

    /// The bytes of `data` (as UTF-8, without a byte order mark), its members and range, when it is a JSON object.
    package static func object(_ data: Data) -> (bytes: [UInt8], members: [Member], range: Range<Int>)? {
        guard case let (bytes, .object(members, range))? = parsed(data) else { return nil }
        return (bytes, members, range)
    }

    /// `data` as UTF-8 without a byte order mark, and the value it holds: the bytes as they are (the decoder skips strings
    /// that are not UTF-8), else as UTF-16 or UTF-32 text; misread text is no value, whose bytes all start in ASCII.
    package static func parsed(_ data: Data) -> (bytes: [UInt8], node: Node)? {
        for encoding: String.Encoding in [.utf8, .utf16, .utf16LittleEndian, .utf32, .utf32LittleEndian] {
            let text = encoding == .utf8 ? [UInt8](data) : String(data: data, encoding: encoding).map { Array($0.utf8) }
            guard let text else { continue }
            var parser = Parser(bytes: text.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(text.dropFirst(3)) : text)
            guard let node = parser.parseValue(depth: 0), parser.isAtEnd else { continue }
            return (parser.bytes, node)
        }
        return nil
    }

    /// The member at `path` (keys of nested objects) of `node`: the first of a name, as the decoder reads it.
    private static func member(at path: ArraySlice<String>, in node: Node) -> Member? {
        guard let first = path.first, case .object(let members, _) = node,
            let member = members.first(where: { $0.key == first })
        else { return nil }
        return path.count == 1 ? member : self.member(at: path.dropFirst(), in: member.value)
    }

    /// `bytes` with `member` of `model` added last to the object at `path`, before any trailing comma; `nil` if none.
    private static func inserting(
        _ member: Member, from model: [UInt8], at path: ArraySlice<String>, into bytes: [UInt8]
    ) -> [UInt8]? {
        var parser = Parser(bytes: bytes)
        guard let root = parser.parseValue(depth: 0),
            case .object(let members, let range) = path.isEmpty ? root : Self.member(at: path, in: root)?.value
        else { return nil }
        let separator: [UInt8] = members.isEmpty ? [] : [UInt8(ascii: ",")]
        let text = separator + model[member.rawKey] + [UInt8(ascii: ":")] + model[member.value.range]
        var result = bytes
        result.insert(contentsOf: text, at: members.last?.value.range.upperBound ?? range.lowerBound + 1)
        return result
    }

    /// A parsed JSON value: an object's members, or any other value; with where it is.
    package indirect enum Node {
        case object([Member], Range<Int>)
        case other(Range<Int>)

        var range: Range<Int> {
            switch self {
            case .object(_, let range), .other(let range): range
            }
        }
    }

    package struct Member {
        /// The key as written, quotes included, and as compared (escapes resolved).
        var rawKey: Range<Int>
        var key: String
        var value: Node
    }

    /// A parser of JSON that Foundation read or wrote: finds where values end, parses objects, skips the rest.
    package struct Parser {
        let bytes: [UInt8]
        var index = 0

        /// Deeper than `JSONDecoder` reads (512): only keeps a wrong input from recursing far.
        private static let maximumDepth = 1_024

        mutating func parseValue(depth: Int) -> Node? {
            skipWhitespace()
            guard index < bytes.count, depth < Self.maximumDepth else { return nil }
            let start = index
            if bytes[index] == UInt8(ascii: "{") {
                guard let members = parseObject(depth: depth) else { return nil }
                return .object(members, start..<index)
            }
            guard skipValue() else { return nil }
            return .other(start..<index)
        }

        private mutating func parseObject(depth: Int) -> [Member]? {
            var members: [Member] = []
            // A `}` may follow the `{` and each comma: an empty object, or a trailing comma, which Foundation reads.
            repeat {
                index += 1  // the `{` or a comma
                skipWhitespace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: "}") { break }
                let keyStart = index
                guard bytes[index] == UInt8(ascii: "\""), skipString() else { return nil }
                let rawKey = keyStart..<index
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                guard let value = parseValue(depth: depth + 1), let key = Self.key(bytes[rawKey]) else { return nil }
                members.append(Member(rawKey: rawKey, key: key, value: value))
                skipWhitespace()
            } while index < bytes.count && bytes[index] == UInt8(ascii: ",")
            guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else { return nil }
            index += 1
            return members
        }

        /// Whether only whitespace is left.
        var isAtEnd: Bool { bytes[index...].allSatisfy { " \t\n\r".utf8.contains($0) } }

        private static func key(_ quoted: ArraySlice<UInt8>) -> String? {
            if !quoted.contains(UInt8(ascii: "\\")) {
                return String(decoding: quoted.dropFirst().dropLast(), as: UTF8.self)
            }
            return try? JSONCoders.decoder.decode(String.self, from: Data(quoted))
        }

        private mutating func skipWhitespace() {
            while index < bytes.count, " \t\n\r".utf8.contains(bytes[index]) { index += 1 }
        }

        /// Skips a string, an array, a number or a literal.
        private mutating func skipValue() -> Bool {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return skipString()
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                var depth = 0
                while index < bytes.count {
                    switch bytes[index] {
                    case UInt8(ascii: "\""):
                        guard skipString() else { return false }
                        continue
                    case UInt8(ascii: "["), UInt8(ascii: "{"):
                        depth += 1
                    case UInt8(ascii: "]"), UInt8(ascii: "}"):
                        depth -= 1
                        if depth == 0 {
                            index += 1
                            return true
                        }
                    default:
                        break
                    }
                    index += 1
                }
                return false
            default:
                let start = index
                index = bytes[index...].firstIndex { ",}] \t\n\r".utf8.contains($0) } ?? bytes.count
                return index > start && "-0123456789tfn".utf8.contains(bytes[start])
            }
        }

        private mutating func skipString() -> Bool {
            index += 1
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\\"): index += 2
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                default: index += 1
                }
            }
            return false
        }
    }
}
