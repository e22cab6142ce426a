/// A file name as the tool prints it: one line, no terminal control, every byte recoverable.
///
/// Printable ASCII and printable UTF-8 characters are printed as they are. A backslash is printed as `\\`, a tab as
/// `\t` and a newline as `\n`. Every other byte is printed as `\xNN` (two lowercase hex digits): other control
/// characters (ESC is `\x1b`), DEL, bytes that are not UTF-8, and each byte of a character that is not printable
/// (unassigned, private use, format characters such as U+202E RIGHT-TO-LEFT OVERRIDE, separators other than the
/// space). `printf '%b'` turns the printed form back into the name.
func printableName(_ bytes: [UInt8]) -> String {
    var output = ""
    var index = 0
    while index < bytes.count {
        let length = utf8SequenceLength(bytes, at: index)
        let sequence = bytes[index..<(index + max(length, 1))]
        index += max(length, 1)
        guard length > 0 else {
            output += hexEscape(sequence.first!)
            continue
        }
        var decoder = UTF8()
        var iterator = sequence.makeIterator()
        guard case .scalarValue(let scalar) = decoder.decode(&iterator) else {
            output += sequence.map(hexEscape).joined()
            continue
        }
        switch scalar {
        case "\\": output += "\\\\"
        case "\t": output += "\\t"
        case "\n": output += "\\n"
        default: output += isPrintable(scalar) ? String(scalar) : sequence.map(hexEscape).joined()
        }
    }
    return output
}

/// A printable name as `printableName(_:)` prints it.
func printableName(_ name: String) -> String {
    printableName(Array(name.utf8))
}

private func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
    if scalar.isASCII { return (0x20...0x7E).contains(scalar.value) }
    switch scalar.properties.generalCategory {
    case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator,
        .spaceSeparator:
        return false
    default:
        return true
    }
}

private func hexEscape(_ byte: UInt8) -> String {
    let digits = String(byte, radix: 16)
    return "\\x" + (digits.count == 1 ? "0" + digits : digits)
}

/// The length of the well-formed UTF-8 sequence at `index`, or 0 when the bytes there are not one.
func utf8SequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
    let lead = bytes[index]
    let length: Int
    var lower: UInt8 = 0x80
    var upper: UInt8 = 0xBF
    switch lead {
    case 0x00...0x7F: return 1
    case 0xC2...0xDF: length = 2
    case 0xE0: (length, lower) = (3, 0xA0)
    case 0xE1...0xEC, 0xEE...0xEF: length = 3
    case 0xED: (length, upper) = (3, 0x9F)
    case 0xF0: (length, lower) = (4, 0x90)
    case 0xF1...0xF3: length = 4
    case 0xF4: (length, upper) = (4, 0x8F)
    default: return 0
    }
    guard index + length <= bytes.count else { return 0 }
    for offset in 1..<length {
        let byte = bytes[index + offset]
        guard (lower...upper).contains(byte) else { return 0 }
        (lower, upper) = (0x80, 0xBF)
    }
    return length
}
