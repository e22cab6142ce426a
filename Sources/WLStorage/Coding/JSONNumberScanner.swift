import Foundation

/// The number being read: its grammar, and what its value is as a `Double`.
struct NumberScanner: Sendable {
    enum Part {
        /// After `-`.
        case sign
        /// After a leading `0`.
        case zero
        case integer
        /// After `.`.
        case fractionStart
        case fraction
        /// After `e` or `E`.
        case exponentStart
        /// After the exponent's sign.
        case exponentSign
        case exponent
    }

    enum Outcome {
        /// The byte belongs to the number.
        case continued
        /// The byte does not; the number ended before it.
        case ended
        /// The byte cannot follow what came before.
        case invalid(String)
    }

    /// The longest start of a number quoted in a message.
    static let quotedLength = 40

    private(set) var start = 0
    private var part = Part.integer
    /// The number's first bytes, for messages.
    private var text: [UInt8] = []
    private var textLength = 0
    /// The digits from the first non-zero one, at most ``JSONValidator/significantDigitLimit``.
    private var digits: [UInt8] = []
    /// Whether a non-zero digit came after the digits kept.
    private var moreNonZeroDigits = false
    /// Digits of the integer part from its first non-zero one.
    private var integerDigits = 0
    /// Zeros after the point before the first non-zero digit, when the integer part is zero.
    private var fractionLeadingZeros = 0
    private var exponent = 0
    private var exponentIsNegative = false

    /// Whether the number may end here.
    var canEnd: Bool {
        switch part {
        case .zero, .integer, .fraction, .exponent: true
        case .sign, .fractionStart, .exponentStart, .exponentSign: false
        }
    }

    mutating func begin(_ byte: UInt8, at offset: Int) {
        start = offset
        text.removeAll(keepingCapacity: true)
        textLength = 0
        digits.removeAll(keepingCapacity: true)
        moreNonZeroDigits = false
        integerDigits = 0
        fractionLeadingZeros = 0
        exponent = 0
        exponentIsNegative = false
        part = .sign
        _ = take(byte)
    }

    mutating func take(_ byte: UInt8) -> Outcome {
        let isDigit = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        switch (part, byte) {
        case (.sign, UInt8(ascii: "-")) where textLength == 0:
            break
        case (.sign, UInt8(ascii: "0")):
            part = .zero
        case (.sign, _) where isDigit:
            part = .integer
            addSignificand(byte, inInteger: true)
        case (.sign, _):
            return .invalid("a number needs a digit after '-'")
        case (.zero, _) where isDigit:
            return .invalid("a number cannot start with 0 followed by another digit")
        case (.integer, _) where isDigit:
            addSignificand(byte, inInteger: true)
        case (.zero, UInt8(ascii: ".")), (.integer, UInt8(ascii: ".")):
            part = .fractionStart
        case (.fractionStart, _) where isDigit, (.fraction, _) where isDigit:
            part = .fraction
            addSignificand(byte, inInteger: false)
        case (.fractionStart, _):
            return .invalid("a number needs a digit after '.'")
        case (.zero, UInt8(ascii: "e")), (.zero, UInt8(ascii: "E")), (.integer, UInt8(ascii: "e")),
            (.integer, UInt8(ascii: "E")), (.fraction, UInt8(ascii: "e")), (.fraction, UInt8(ascii: "E")):
            part = .exponentStart
        case (.exponentStart, UInt8(ascii: "+")), (.exponentStart, UInt8(ascii: "-")):
            exponentIsNegative = byte == UInt8(ascii: "-")
            part = .exponentSign
        case (.exponentStart, _) where isDigit, (.exponentSign, _) where isDigit, (.exponent, _) where isDigit:
            part = .exponent
            // Past 2^50 (more digits than any text has) the value is out of range whatever its digits: stop there.
            if exponent < 1 << 50 { exponent = exponent * 10 + Int(byte - UInt8(ascii: "0")) }
        case (.exponentStart, _), (.exponentSign, _):
            return .invalid("a number needs a digit in its exponent")
        case (.zero, _), (.integer, _), (.fraction, _), (.exponent, _):
            return .ended
        }
        if textLength < Self.quotedLength { text.append(byte) }
        textLength += 1
        return .continued
    }

    private mutating func addSignificand(_ byte: UInt8, inInteger: Bool) {
        if digits.isEmpty, byte == UInt8(ascii: "0") {
            if !inInteger { fractionLeadingZeros += 1 }
            return
        }
        if inInteger { integerDigits += 1 }
        if digits.count < JSONValidator.significantDigitLimit {
            digits.append(byte)
        } else if byte != UInt8(ascii: "0") {
            moreNonZeroDigits = true
        }
    }

    /// Why the number, which has ended, is not readable as a `Double`, or `nil` when it is.
    func rangeProblem() -> String? {
        guard !digits.isEmpty else { return nil }  // zero, however written
        // The value is 0.DIGITS × 10^scale, so it lies in [10^(scale - 1), 10^scale).
        let base = integerDigits > 0 ? integerDigits : -fractionLeadingZeros
        let scale = base + (exponentIsNegative ? -exponent : exponent)
        let tooLarge: Bool
        if scale <= 308 && scale >= -322 {
            return nil  // within [1e-323, 1e308): a finite, non-zero Double
        } else if scale >= 310 {
            tooLarge = true
        } else if scale <= -324 {
            tooLarge = false  // below 1e-324, less than half the smallest Double: reads as zero
        } else {
            // Near either end: round the digits kept, and a trailing 1 standing for the non-zero digits dropped.
            var decimal = "0." + String(decoding: digits, as: UTF8.self)
            if moreNonZeroDigits { decimal += "1" }
            decimal += "e\(scale)"
            guard let value = Double(decimal) else { return nil }
            if value.isFinite && value != 0 { return nil }
            tooLarge = !value.isFinite
        }
        var quoted = String(decoding: text, as: UTF8.self)
        if textLength > text.count { quoted += "…" }
        return "the number \(quoted) is out of the range of a Double (\(tooLarge ? "too large" : "it would read as 0"))"
    }
}
