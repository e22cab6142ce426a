/// Why a text is not JSON the package can read, and where: a short reason and the offset of the byte it is about.
package struct JSONProblem: Error, Equatable, Sendable, CustomStringConvertible {
    /// What is wrong, as a short phrase such as `expected ':' after an object key, found ','`.
    package var reason: String
    /// The offset, from 0, of the byte the reason is about, counted from the first byte of the text (a byte order
    /// mark included). At the end of the text it is the text's length.
    package var offset: Int

    package init(reason: String, offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    /// `reason at byte offset`.
    package var description: String { "\(reason) at byte \(offset)" }
}

/// A streaming JSON validator: bytes go in, in chunks of any size, and out comes the first problem, if any.
///
/// It accepts what RFC 8259 calls a JSON text, with these choices, which are those of the `JSONDecoder` the package
/// decodes values with:
/// - Any value may stand at the top level, not only an object or an array (`42`, `"abc"`, `null`).
/// - The text must be UTF-8. One byte order mark (`EF BB BF`) is accepted at the very start.
/// - A `\u` escape of a UTF-16 surrogate must be a high surrogate followed by a `\u` escape of a low one.
/// - Arrays and objects nest at most ``maximumDepth`` deep (512 by default, as deep as `JSONDecoder` reads).
/// - A number must be readable as a `Double`: one whose value is beyond its range (`1e400`), or that is not zero but
///   would read as zero (`1e-400`), is refused. `JSONDecoder` refuses both, whatever the type it decodes, while
///   `JSONSerialization` reads `1e-400` as `0`. Numbers with more digits than a `Double` holds, such as
///   `12345678901234567890`, are fine: they read as the nearest `Double`, or exactly as a `Decimal`.
///
/// Memory does not grow with the text: the validator keeps one flag per open array or object (at most
/// ``maximumDepth``) and at most ``significantDigitLimit`` digits of the number it is in, so a file of any size can
/// be checked through a small buffer.
///
/// ```swift
/// var validator = JSONValidator()
/// while let chunk = nextChunk() {
///     if validator.feed(chunk) != nil { break }
/// }
/// if let problem = validator.finish() { print(problem) }  // "unexpected end of the text in a string at byte 9"
/// ```
package struct JSONValidator: Sendable {
    /// How deep arrays and objects may nest by default: as deep as `JSONDecoder` reads them.
    package static let defaultMaximumDepth = 512

    /// How many significant digits of a number are kept to judge its range. The decimal expansions of the values
    /// where a `Double` stops rounding to a finite number (`2^1024 - 2^970`, 309 digits) or starts rounding to zero
    /// (`2^-1075`, 752 significant digits) are shorter, so the digits beyond, which only count as "some non-zero
    /// digit follows", never change the verdict.
    package static let significantDigitLimit = 800

    /// How deep arrays and objects may nest.
    package let maximumDepth: Int

    /// The first problem found, or `nil` while the bytes so far can begin a JSON text. Once found, it stays.
    package private(set) var problem: JSONProblem?

    /// How many bytes were fed.
    package private(set) var byteCount = 0

    private var phase = Phase.value
    /// One entry per open container, `true` for an object.
    private var containers: [Bool] = []

    private var stringIsKey = false
    private var stringPhase = StringPhase.characters
    /// Where the escape being read, or the high surrogate escape awaiting its low surrogate, starts.
    private var escapeStart = 0
    private var unicodeDigits = 0
    private var unicodeValue: UInt32 = 0
    private var awaitingLowSurrogate = false
    private var utf8Remaining = 0
    private var utf8Lower: UInt8 = 0x80
    private var utf8Upper: UInt8 = 0xBF

    private var literal: Literal = .null
    private var literalMatched = 0
    private var byteOrderMarkMatched = 0

    private var number = NumberScanner()

    /// A validator whose containers may nest `maximumDepth` deep.
    package init(maximumDepth: Int = JSONValidator.defaultMaximumDepth) {
        self.maximumDepth = maximumDepth
    }

    /// The problem of `bytes` as a whole JSON text, or `nil` when it is one.
    package static func problem<Bytes: Collection<UInt8>>(
        in bytes: Bytes, maximumDepth: Int = defaultMaximumDepth
    ) -> JSONProblem? {
        var validator = JSONValidator(maximumDepth: maximumDepth)
        validator.feed(bytes)
        return validator.finish()
    }

    /// Checks the next bytes of the text.
    ///
    /// - Returns: The first problem of the text so far, or `nil`. The bytes after a problem are not looked at.
    @discardableResult
    package mutating func feed<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> JSONProblem? {
        let done = bytes.withContiguousStorageIfAvailable { buffer in feed(UnsafeRawBufferPointer(buffer)) }
        if let done { return done }
        return Array(bytes).withUnsafeBytes { feed($0) }
    }

    /// Checks the next bytes of the text.
    ///
    /// - Returns: The first problem of the text so far, or `nil`. The bytes after a problem are not looked at.
    @discardableResult
    package mutating func feed(_ bytes: UnsafeRawBufferPointer) -> JSONProblem? {
        guard problem == nil else { return problem }
        var index = 0
        let count = bytes.count
        while index < count {
            if phase == .string, stringPhase == .characters, !awaitingLowSurrogate {
                // The common case, plain ASCII within a string, without the state machine.
                while index < count {
                    let byte = bytes[index]
                    guard byte >= 0x20, byte < 0x80, byte != .quote, byte != .backslash else { break }
                    index += 1
                    byteCount += 1
                }
                if index == count { break }
            }
            guard consume(bytes[index]) else { return problem }
            index += 1
            byteCount += 1
        }
        return nil
    }

    /// Says whether the bytes fed make a whole JSON text.
    ///
    /// - Returns: The first problem of the text, or `nil` when it is a JSON text.
    package mutating func finish() -> JSONProblem? {
        guard problem == nil else { return problem }
        if phase == .number, number.canEnd {
            if let reason = number.rangeProblem() { return fail(reason, at: number.start) }
            phase = .afterValue
        }
        if phase == .afterValue, containers.isEmpty { return nil }
        let reason: String
        switch phase {
        case .value where containers.isEmpty: reason = "no JSON value in the text"
        case .string: reason = "unexpected end of the text in a string"
        case .number: reason = "unexpected end of the text in a number"
        case .literal: reason = "unexpected end of the text in '\(literal.text)'"
        case .byteOrderMark: reason = "unexpected end of the text in its byte order mark"
        default: reason = "unexpected end of the text in \(containers.last == true ? "an object" : "an array")"
        }
        return fail(reason, at: byteCount)
    }

    // MARK: The state machine

    private enum Phase {
        /// A value must come: at the start, after `:`, after `,` in an array.
        case value
        /// After `[`.
        case valueOrArrayEnd
        /// After `{`.
        case keyOrObjectEnd
        /// After `,` in an object.
        case key
        /// After a key.
        case colon
        /// After a whole value.
        case afterValue
        case byteOrderMark
        case string
        case literal
        case number
    }

    private enum StringPhase {
        case characters, escape, unicode, utf8
    }

    private enum Literal {
        case `true`, `false`, null

        var text: String {
            switch self {
            case .true: "true"
            case .false: "false"
            case .null: "null"
            }
        }

        var bytes: [UInt8] {
            switch self {
            case .true: Self.trueBytes
            case .false: Self.falseBytes
            case .null: Self.nullBytes
            }
        }

        private static let trueBytes = Array("true".utf8)
        private static let falseBytes = Array("false".utf8)
        private static let nullBytes = Array("null".utf8)
    }

    @discardableResult
    private mutating func fail(_ reason: String, at offset: Int? = nil) -> JSONProblem {
        let found = JSONProblem(reason: reason, offset: offset ?? byteCount)
        problem = found
        return found
    }

    /// Takes one byte at ``byteCount``. Returns `false` when it sets ``problem``.
    private mutating func consume(_ byte: UInt8) -> Bool {
        switch phase {
        case .string:
            return consumeInString(byte)
        case .number:
            switch number.take(byte) {
            case .continued:
                return true
            case .invalid(let reason):
                fail(reason)
                return false
            case .ended:
                if let reason = number.rangeProblem() {
                    fail(reason, at: number.start)
                    return false
                }
                phase = .afterValue
                return consume(byte)
            }
        case .literal:
            let expected = literal.bytes
            guard byte == expected[literalMatched] else {
                fail("expected '\(literal.text)', found \(Self.describe(byte))")
                return false
            }
            literalMatched += 1
            if literalMatched == expected.count { phase = .afterValue }
            return true
        case .byteOrderMark:
            let mark: [UInt8] = [0xEF, 0xBB, 0xBF]
            guard byte == mark[byteOrderMarkMatched] else {
                fail("the text is not UTF-8 (\(Self.hex(byte)))")
                return false
            }
            byteOrderMarkMatched += 1
            if byteOrderMarkMatched == mark.count { phase = .value }
            return true
        default:
            break
        }

        if byte.isJSONWhitespace { return true }
        if byte >= 0x80, !(0xC2...0xF4).contains(byte), !(phase == .value && byteCount == 0 && byte == 0xEF) {
            fail("the text is not UTF-8 (\(Self.hex(byte)))")
            return false
        }
        switch phase {
        case .value, .valueOrArrayEnd:
            if phase == .valueOrArrayEnd, byte == .closeBracket { return closeContainer() }
            if phase == .value, byteCount == 0, byte == 0xEF {
                phase = .byteOrderMark
                byteOrderMarkMatched = 1
                return true
            }
            return beginValue(byte, expected: phase == .value ? "a value" : "a value or ']'")
        case .keyOrObjectEnd, .key:
            if phase == .keyOrObjectEnd, byte == .closeBrace { return closeContainer() }
            guard byte == .quote else {
                fail("expected \(phase == .key ? "a string key" : "a string key or '}'"), found \(Self.describe(byte))")
                return false
            }
            beginString(isKey: true)
            return true
        case .colon:
            guard byte == .colon else {
                fail("expected ':' after an object key, found \(Self.describe(byte))")
                return false
            }
            phase = .value
            return true
        case .afterValue:
            guard let isObject = containers.last else {
                fail("unexpected text after the JSON value: \(Self.describe(byte))")
                return false
            }
            if byte == .comma {
                phase = isObject ? .key : .value
                return true
            }
            if byte == (isObject ? .closeBrace : .closeBracket) { return closeContainer() }
            fail("expected ',' or '\(isObject ? "}" : "]")', found \(Self.describe(byte))")
            return false
        case .string, .number, .literal, .byteOrderMark:
            return true  // handled above
        }
    }

    private mutating func beginValue(_ byte: UInt8, expected: String) -> Bool {
        switch byte {
        case .openBrace, .openBracket:
            guard containers.count < maximumDepth else {
                fail("arrays and objects nest deeper than \(maximumDepth)")
                return false
            }
            containers.append(byte == .openBrace)
            phase = byte == .openBrace ? .keyOrObjectEnd : .valueOrArrayEnd
        case .quote:
            beginString(isKey: false)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            number.begin(byte, at: byteCount)
            phase = .number
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            literal = byte == UInt8(ascii: "t") ? .true : byte == UInt8(ascii: "f") ? .false : .null
            literalMatched = 1
            phase = .literal
        default:
            fail("expected \(expected), found \(Self.describe(byte))")
            return false
        }
        return true
    }

    private mutating func closeContainer() -> Bool {
        containers.removeLast()
        phase = .afterValue
        return true
    }

    private mutating func beginString(isKey: Bool) {
        stringIsKey = isKey
        stringPhase = .characters
        awaitingLowSurrogate = false
        phase = .string
    }

    private mutating func consumeInString(_ byte: UInt8) -> Bool {
        switch stringPhase {
        case .characters:
            if awaitingLowSurrogate, byte != .backslash {
                fail("a \\u escape of a high surrogate is not followed by one of a low surrogate", at: escapeStart)
                return false
            }
            switch byte {
            case .quote:
                phase = stringIsKey ? .colon : .afterValue
            case .backslash:
                if !awaitingLowSurrogate { escapeStart = byteCount }
                stringPhase = .escape
            case 0x00..<0x20:
                fail("a control character (\(Self.describe(byte))) in a string; write it as an escape")
                return false
            case 0x20..<0x80:
                break
            case 0xC2...0xDF:
                beginUTF8(remaining: 1, lower: 0x80, upper: 0xBF)
            case 0xE0:
                beginUTF8(remaining: 2, lower: 0xA0, upper: 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF:
                beginUTF8(remaining: 2, lower: 0x80, upper: 0xBF)
            case 0xED:
                beginUTF8(remaining: 2, lower: 0x80, upper: 0x9F)
            case 0xF0:
                beginUTF8(remaining: 3, lower: 0x90, upper: 0xBF)
            case 0xF1...0xF3:
                beginUTF8(remaining: 3, lower: 0x80, upper: 0xBF)
            case 0xF4:
                beginUTF8(remaining: 3, lower: 0x80, upper: 0x8F)
            default:
                fail("the text is not UTF-8 (\(Self.hex(byte)) in a string)")
                return false
            }
        case .utf8:
            guard (utf8Lower...utf8Upper).contains(byte) else {
                fail("the text is not UTF-8 (\(Self.hex(byte)) in a string)")
                return false
            }
            utf8Remaining -= 1
            utf8Lower = 0x80
            utf8Upper = 0xBF
            if utf8Remaining == 0 { stringPhase = .characters }
        case .escape:
            if awaitingLowSurrogate, byte != UInt8(ascii: "u") {
                fail("a \\u escape of a high surrogate is not followed by one of a low surrogate", at: escapeStart)
                return false
            }
            switch byte {
            case .quote, .backslash, UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                UInt8(ascii: "r"), UInt8(ascii: "t"):
                stringPhase = .characters
            case UInt8(ascii: "u"):
                unicodeDigits = 0
                unicodeValue = 0
                stringPhase = .unicode
            default:
                fail("an invalid escape in a string: '\\' followed by \(Self.describe(byte))", at: byteCount - 1)
                return false
            }
        case .unicode:
            guard let digit = byte.hexDigitValue else {
                fail("a \\u escape needs 4 hex digits, found \(Self.describe(byte))")
                return false
            }
            unicodeValue = unicodeValue << 4 | UInt32(digit)
            unicodeDigits += 1
            guard unicodeDigits == 4 else { return true }
            stringPhase = .characters
            let isHigh = (0xD800...0xDBFF).contains(unicodeValue)
            let isLow = (0xDC00...0xDFFF).contains(unicodeValue)
            if awaitingLowSurrogate {
                guard isLow else {
                    fail("a \\u escape of a high surrogate is not followed by one of a low surrogate", at: escapeStart)
                    return false
                }
                awaitingLowSurrogate = false
            } else if isHigh {
                awaitingLowSurrogate = true
            } else if isLow {
                fail("a \\u escape of a low surrogate without a high surrogate before it", at: escapeStart)
                return false
            }
        }
        return true
    }

    private mutating func beginUTF8(remaining: Int, lower: UInt8, upper: UInt8) {
        utf8Remaining = remaining
        utf8Lower = lower
        utf8Upper = upper
        stringPhase = .utf8
    }

    /// `byte` for a message: `'x'` for printable ASCII, `byte 0x1b` otherwise.
    private static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(String(UnicodeScalar(byte)))'" : hex(byte)
    }

    /// `byte 0x1b`.
    private static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return "byte 0x\(digits.count == 1 ? "0" + digits : digits)"
    }
}

extension UInt8 {
    fileprivate static let quote = UInt8(ascii: "\"")
    fileprivate static let backslash = UInt8(ascii: "\\")
    fileprivate static let colon = UInt8(ascii: ":")
    fileprivate static let comma = UInt8(ascii: ",")
    fileprivate static let openBrace = UInt8(ascii: "{")
    fileprivate static let closeBrace = UInt8(ascii: "}")
    fileprivate static let openBracket = UInt8(ascii: "[")
    fileprivate static let closeBracket = UInt8(ascii: "]")

    fileprivate var isJSONWhitespace: Bool {
        self == 0x20 || self == 0x0A || self == 0x0D || self == 0x09
    }

    fileprivate var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
