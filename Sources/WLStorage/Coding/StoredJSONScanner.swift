/// One value, or one object key, of a JSON text, as ``StoredJSONScanner`` finds it.
struct StoredJSONToken {
    enum Kind: UInt8 {
        case object, array, key, string, number, `true`, `false`, null
    }

    var kind: Kind
    /// A string without escapes; a number without a fraction or an exponent.
    var simple: Bool
    /// Strings and keys: the offset of the first byte after the opening quote. Numbers: of their first byte.
    var start: Int32
    /// Strings and keys: the offset of the closing quote. Numbers: the offset after their last byte. Objects and
    /// arrays: the index of the first token after their last member.
    var end: Int32
    /// Objects: how many members; arrays: how many elements.
    var count: Int32
}

/// Reads a whole JSON text into a flat list of tokens, in order, or finds that it is not a text that
/// ``StoredJSONDecoder`` can read with certainty.
///
/// It accepts a subset of what `JSONDecoder` accepts, never more: RFC 8259 JSON in UTF-8 without a byte order mark,
/// nested at most ``maximumDepth`` deep, with
/// - object keys of printable ASCII only, without escapes (any other key could equal another one, or a key the type
///   asks for, in ways that depend on how `String` compares: those texts are left to `JSONDecoder`), and no key twice
///   in one object (`JSONDecoder` takes the first of them, a choice better not imitated);
/// - strings whose UTF-8 is valid and whose `\u` escapes of UTF-16 surrogates come in pairs;
/// - numbers that a `Double` holds: a number with an exponent or of more than 300 characters is read to check that it
///   is neither beyond `Double`'s range nor a non-zero that reads as zero, which `JSONDecoder` refuses.
///
/// The whole text is checked, members no type asks for included, so that the decoder never succeeds on a text that
/// `JSONDecoder` refuses.
struct StoredJSONScanner {
    /// How deep arrays and objects may nest: half of what `JSONDecoder` reads, far beyond any stored value.
    static let maximumDepth = 256
    /// Numbers longer than this are read to check their range; shorter ones without an exponent are within it.
    static let plainNumberLength = 300
    /// Objects with more members than this are checked for a repeated key through a set rather than pair by pair.
    static let pairwiseKeyCheckLimit = 12

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var tokens: [StoredJSONToken] = []

    private init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The tokens of `bytes`, or `nil` when they are not a JSON text that the decoder reads with certainty.
    static func tokens(of bytes: [UInt8]) -> [StoredJSONToken]? {
        guard bytes.count < Int(Int32.max) else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            var scanner = StoredJSONScanner(bytes: buffer)
            scanner.tokens.reserveCapacity(buffer.count / 4 + 4)
            guard scanner.scanValue(depth: 0) else { return nil }
            scanner.skipWhitespace()
            guard scanner.index == buffer.count else { return nil }
            return scanner.tokens
        }
    }

    /// The index of the token after the value whose token is at `index`, in `tokens`.
    static func next(after index: Int, in tokens: [StoredJSONToken]) -> Int {
        switch tokens[index].kind {
        case .object, .array: Int(tokens[index].end)
        default: index + 1
        }
    }

    // MARK: Values

    private mutating func scanValue(depth: Int) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"): return scanObject(depth: depth + 1)
        case UInt8(ascii: "["): return scanArray(depth: depth + 1)
        case UInt8(ascii: "\""): return scanString()
        case UInt8(ascii: "t"): return scanLiteral("true", .true)
        case UInt8(ascii: "f"): return scanLiteral("false", .false)
        case UInt8(ascii: "n"): return scanLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return scanNumber()
        default: return false
        }
    }

    private mutating func scanObject(depth: Int) -> Bool {
        guard depth <= Self.maximumDepth else { return false }
        let at = tokens.count
        tokens.append(StoredJSONToken(kind: .object, simple: false, start: Int32(index), end: 0, count: 0))
        index += 1
        var count: Int32 = 0
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                guard scanKey() else { return false }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                guard scanValue(depth: depth) else { return false }
                count += 1
                guard let more = scanSeparator(closing: UInt8(ascii: "}")) else { return false }
                if !more { break }
            }
        }
        tokens[at].count = count
        tokens[at].end = Int32(tokens.count)
        return keysDiffer(inObjectAt: at)
    }

    /// Reads what follows a member of an object or an element of an array: a comma (`true`, another follows) or the
    /// container's closing bracket (`false`); `nil` for anything else.
    private mutating func scanSeparator(closing: UInt8) -> Bool? {
        skipWhitespace()
        guard index < bytes.count else { return nil }
        let byte = bytes[index]
        guard byte == UInt8(ascii: ",") || byte == closing else { return nil }
        index += 1
        return byte == UInt8(ascii: ",")
    }

    private mutating func scanArray(depth: Int) -> Bool {
        guard depth <= Self.maximumDepth else { return false }
        let at = tokens.count
        tokens.append(StoredJSONToken(kind: .array, simple: false, start: Int32(index), end: 0, count: 0))
        index += 1
        var count: Int32 = 0
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
        } else {
            while true {
                guard scanValue(depth: depth) else { return false }
                count += 1
                guard let more = scanSeparator(closing: UInt8(ascii: "]")) else { return false }
                if !more { break }
            }
        }
        tokens[at].count = count
        tokens[at].end = Int32(tokens.count)
        return true
    }

    private mutating func scanLiteral(_ literal: StaticString, _ kind: StoredJSONToken.Kind) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        let text = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != text[offset] { return false }
        tokens.append(
            StoredJSONToken(kind: kind, simple: true, start: Int32(index), end: Int32(index + count), count: 0))
        index += count
        return true
    }

    // MARK: Strings and keys

    /// A key: printable ASCII without escapes, or the text is left to `JSONDecoder`.
    private mutating func scanKey() -> Bool {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
        index += 1
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                tokens.append(
                    StoredJSONToken(kind: .key, simple: true, start: Int32(start), end: Int32(index), count: 0))
                index += 1
                return true
            }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return false }
            index += 1
        }
        return false
    }

    private mutating func scanString() -> Bool {
        index += 1
        let start = index
        var simple = true
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                tokens.append(
                    StoredJSONToken(kind: .string, simple: simple, start: Int32(start), end: Int32(index), count: 0))
                index += 1
                return true
            case UInt8(ascii: "\\"):
                simple = false
                guard scanEscape() else { return false }
            case 0..<0x20:
                return false  // a control character must be escaped
            case 0x20..<0x80:
                index += 1
            default:
                guard scanMultibyteCharacter() else { return false }
            }
        }
        return false
    }

    /// An escape, from its backslash; a `\u` escape of a high surrogate must be followed by one of a low surrogate.
    private mutating func scanEscape() -> Bool {
        guard index + 1 < bytes.count else { return false }
        switch bytes[index + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            index += 2
            return true
        case UInt8(ascii: "u"):
            guard let unit = Self.hexadecimalUnit(in: bytes, at: index + 2) else { return false }
            index += 6
            switch unit {
            case 0xD800...0xDBFF:
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                    bytes[index + 1] == UInt8(ascii: "u"),
                    let low = Self.hexadecimalUnit(in: bytes, at: index + 2), (0xDC00...0xDFFF).contains(low)
                else { return false }
                index += 6
                return true
            case 0xDC00...0xDFFF:
                return false
            default:
                return true
            }
        default:
            return false
        }
    }

    /// The four hexadecimal digits at `offset`, as a UTF-16 code unit.
    static func hexadecimalUnit(in bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt32? {
        guard offset + 4 <= bytes.count else { return nil }
        var unit: UInt32 = 0
        for byte in bytes[offset..<offset + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            unit = unit << 4 | UInt32(digit)
        }
        return unit
    }

    /// A character of two to four bytes of valid UTF-8 (no overlong form, no surrogate, nothing beyond U+10FFFF).
    private mutating func scanMultibyteCharacter() -> Bool {
        let lead = bytes[index]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            secondRange = 0x80...0x9F
        case 0xF0:
            length = 4
            secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            secondRange = 0x80...0x8F
        default: return false
        }
        guard index + length <= bytes.count, secondRange.contains(bytes[index + 1]) else { return false }
        for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) { return false }
        index += length
        return true
    }

    // MARK: Numbers

    private mutating func scanNumber() -> Bool {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { return false }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            guard skipDigits() else { return false }
        }
        var integer = true
        var exponent = false
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integer = false
            index += 1
            guard skipDigits() else { return false }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integer = false
            exponent = true
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard skipDigits() else { return false }
        }
        if exponent || index - start > Self.plainNumberLength {
            guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)),
                Self.isRepresentable(value, text: bytes[start..<index])
            else { return false }
        }
        tokens.append(
            StoredJSONToken(kind: .number, simple: integer, start: Int32(start), end: Int32(index), count: 0))
        return true
    }

    /// Whether `value`, read from `text`, is one `JSONDecoder` accepts: finite, and zero only when every digit of
    /// `text` before its exponent is.
    static func isRepresentable<F: BinaryFloatingPoint>(_ value: F, text: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        guard value.isFinite else { return false }
        guard value == 0 else { return true }
        for byte in text {
            switch byte {
            case UInt8(ascii: "1")...UInt8(ascii: "9"): return false
            case UInt8(ascii: "e"), UInt8(ascii: "E"): return true
            default: continue
            }
        }
        return true
    }

    /// One digit or more.
    private mutating func skipDigits() -> Bool {
        let start = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        return index > start
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): index += 1
            default: return
            }
        }
    }

    // MARK: Repeated keys

    /// Whether no two keys of the object whose token is at `object` are the same. Keys are printable ASCII without
    /// escapes, so two are the same exactly when their bytes are.
    private func keysDiffer(inObjectAt object: Int) -> Bool {
        let count = Int(tokens[object].count)
        guard count > 1 else { return true }
        let end = Int(tokens[object].end)
        if count <= Self.pairwiseKeyCheckLimit {
            var key = object + 1
            while key < end {
                var other = Self.next(after: key + 1, in: tokens)
                while other < end {
                    if sameBytes(tokens[key], tokens[other]) { return false }
                    other = Self.next(after: other + 1, in: tokens)
                }
                key = Self.next(after: key + 1, in: tokens)
            }
            return true
        }
        var seen = Set<String>(minimumCapacity: count)
        var key = object + 1
        while key < end {
            let token = tokens[key]
            let text = String(decoding: bytes[Int(token.start)..<Int(token.end)], as: UTF8.self)
            guard seen.insert(text).inserted else { return false }
            key = Self.next(after: key + 1, in: tokens)
        }
        return true
    }

    private func sameBytes(_ first: StoredJSONToken, _ second: StoredJSONToken) -> Bool {
        let length = Int(first.end - first.start)
        guard Int(second.end - second.start) == length else { return false }
        let a = Int(first.start)
        let b = Int(second.start)
        for offset in 0..<length where bytes[a + offset] != bytes[b + offset] { return false }
        return true
    }
}
