import Foundation
import WLStorage
import WLStorageJSON

/// JSON as the bytes of a file: checked strictly, as `JSONSerialization` reads JSON (the library leaves as another
/// version's some texts `JSONDecoder` reads but this refuses, such as `1e400`), and re-laid out without re-encoding.
///
/// Laying out the text, rather than parsing and serializing it again, keeps
/// every number, string escape and key order exactly as stored: `1.0` stays `1.0` and a 20-digit integer keeps its
/// digits.
enum JSONText {
    /// Why `data` is not a JSON text (top-level fragments such as `42` or `null` allowed), in Foundation's words
    /// with the offset of the byte it is about (`Invalid value around character 9`), or `nil` when it is.
    static func problem(in data: Data) -> String? {
        JSONSyntax.problem(in: data, strict: true)
    }

    /// `text` as a JSON string: in quotes, with `"`, `\` and the control characters escaped, as `set --string` stores
    /// it.
    static func string(_ text: String) -> String {
        var json = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case "\n": json += "\\n"
            case "\r": json += "\\r"
            case "\t": json += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                json += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: json.unicodeScalars.append(scalar)
            }
        }
        return json + "\""
    }

    /// `json` without whitespace between tokens. `json` must be valid JSON (see ``problem(in:)``). With
    /// `forTerminal`, invisible characters in strings are escaped as by ``pretty(_:)``.
    static func compact(_ json: Data, forTerminal: Bool = false) -> Data {
        layOut(json, pretty: false, escapingInvisibles: forTerminal)
    }

    /// `json` with one member or element per line, indented by two spaces, and `": "` after each key.
    /// `json` must be valid JSON (see ``problem(in:)``).
    ///
    /// For a terminal: characters in strings that a terminal would act on rather than show (C1 controls, such as
    /// U+009B which starts an escape sequence, and format characters, such as the bidirectional override U+202E)
    /// are written as `\u` escapes, which stand for the same JSON value.
    static func pretty(_ json: Data) -> Data {
        layOut(json, pretty: true, escapingInvisibles: true)
    }

    /// Whether `scalar` is one ``pretty(_:)`` escapes.
    static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        (0x80...0x9F).contains(scalar.value) || scalar.properties.generalCategory == .format
            || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// Appends `scalar` as JSON `\u` escapes (a surrogate pair beyond the Basic Multilingual Plane).
    private static func appendEscape(_ scalar: Unicode.Scalar, to output: inout [UInt8]) {
        let units = scalar.utf16
        for unit in units {
            let hex = String(unit, radix: 16)
            output.append(contentsOf: Array("\\u".utf8))
            output.append(contentsOf: Array(String(repeating: "0", count: 4 - hex.count).utf8))
            output.append(contentsOf: Array(hex.utf8))
        }
    }

    private static func layOut(_ json: Data, pretty: Bool, escapingInvisibles: Bool = false) -> Data {
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
                if escapingInvisibles && byte >= 0x80 && !escaped {
                    // A multi-byte character: `problem(in:)` has checked that it is well-formed UTF-8.
                    let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                    let end = min(bytes.count, index - 1 + length)
                    let sequence = bytes[(index - 1)..<end]
                    index = end
                    if let scalar = String(decoding: sequence, as: UTF8.self).unicodeScalars.first,
                        isInvisible(scalar)
                    {
                        appendEscape(scalar, to: &output)
                    } else {
                        output.append(contentsOf: sequence)
                    }
                    continue
                }
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
