import Foundation
import WLStorage

/// JSON as the bytes of a file: checked with the package's ``JSONValidator``, and re-laid out without being
/// re-encoded.
///
/// The validator judges a text as the library's `JSONDecoder` reads it, numbers included: a file the tool calls
/// JSON is one the library can decode. Laying out the text, rather than parsing and serializing it again, keeps
/// every number, string escape and key order exactly as stored: `1.0` stays `1.0` and a 20-digit integer keeps its
/// digits.
enum JSONText {
    /// Why `data` is not a JSON text (top-level fragments such as `42` or `null` allowed), as a reason and the
    /// offset of the byte it is about (`unexpected end of the text in a string at byte 9`), or `nil` when it is.
    static func problem(in data: Data) -> String? {
        JSONValidator.problem(in: data)?.description
    }

    /// `json` without whitespace between tokens. `json` must be valid JSON (see ``problem(in:)``).
    static func compact(_ json: Data) -> Data {
        layOut(json, pretty: false)
    }

    /// `json` with one member or element per line, indented by two spaces, and `": "` after each key.
    /// `json` must be valid JSON (see ``problem(in:)``).
    static func pretty(_ json: Data) -> Data {
        layOut(json, pretty: true)
    }

    private static func layOut(_ json: Data, pretty: Bool) -> Data {
        var bytes = [UInt8](json)
        // A byte order mark is accepted on input and never written.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var depth = 0
        var inString = false
        var escaped = false
        var index = 0

        func newLine() {
            guard pretty else { return }
            output.append(UInt8(ascii: "\n"))
            output.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
        }

        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if inString {
                output.append(byte)
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            if isWhitespace(byte) { continue }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                output.append(byte)
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                output.append(byte)
                // An empty object or array stays on one line: `{}`, `[]`.
                while index < bytes.count, isWhitespace(bytes[index]) { index += 1 }
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") || bytes[index] == UInt8(ascii: "]") {
                    output.append(bytes[index])
                    index += 1
                } else {
                    depth += 1
                    newLine()
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                newLine()
                output.append(byte)
            case UInt8(ascii: ","):
                output.append(byte)
                newLine()
            case UInt8(ascii: ":"):
                output.append(byte)
                if pretty { output.append(UInt8(ascii: " ")) }
            default:
                output.append(byte)
            }
        }
        return Data(output)
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
            || byte == UInt8(ascii: "\r")
    }
}
