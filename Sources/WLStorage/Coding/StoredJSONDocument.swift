import Foundation

/// The bytes and tokens of one decode, shared by the decoders and containers that read them.
final class StoredJSONDocument {
    let bytes: [UInt8]
    let tokens: [StoredJSONToken]
    /// Set once anything has thrown: the decode's value is not to be trusted, whatever the type made of the error.
    private(set) var abandoned = false
    /// For objects with many members, where to start looking for the next key: the member after the last one found,
    /// indexed by the object's token. Made for the first such object.
    private var lookupStarts: [Int32] = []

    /// Objects with more members than this are searched from the member after the last one found.
    private static let linearLookupLimit = 8

    init(bytes: [UInt8], tokens: [StoredJSONToken]) {
        self.bytes = bytes
        self.tokens = tokens
    }

    /// Marks the decode as abandoned, and returns the error to throw.
    func fallback() -> StoredJSONDecoder.Fallback {
        abandoned = true
        return StoredJSONDecoder.Fallback()
    }

    // MARK: Objects and arrays

    /// The token of the value of the member of the object at `object` whose key is `name`; `nil` when there is none,
    /// and when `name` is not plain ASCII (then the decode is abandoned: such a name could equal a key it does not
    /// have the bytes of).
    func member(_ name: String, inObjectAt object: Int) -> Int? {
        var name = name
        return name.withUTF8 { name -> Int? in
            for byte in name where byte >= 0x80 {
                _ = fallback()
                return nil
            }
            let count = Int(tokens[object].count)
            let end = Int(tokens[object].end)
            guard count > 0 else { return nil }
            if count <= Self.linearLookupLimit { return find(name, from: object + 1, to: end) }
            if lookupStarts.isEmpty { lookupStarts = [Int32](repeating: 0, count: tokens.count) }
            let start = lookupStarts[object] == 0 ? object + 1 : Int(lookupStarts[object])
            guard let found = find(name, from: start, to: end) ?? find(name, from: object + 1, to: start) else {
                return nil
            }
            lookupStarts[object] = Int32(StoredJSONScanner.next(after: found, in: tokens))
            return found
        }
    }

    /// The value of the key `name` among the members whose keys are at `start` and after, before `end`.
    private func find(_ name: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) -> Int? {
        var key = start
        while key < end {
            let token = tokens[key]
            if Int(token.end - token.start) == name.count {
                var offset = 0
                let first = Int(token.start)
                while offset < name.count, bytes[first + offset] == name[offset] { offset += 1 }
                if offset == name.count { return key + 1 }
            }
            key = StoredJSONScanner.next(after: key + 1, in: tokens)
        }
        return nil
    }

    /// The keys of the object at `object`, in the order of the text.
    func keys(ofObjectAt object: Int) -> [String] {
        var keys: [String] = []
        keys.reserveCapacity(Int(tokens[object].count))
        let end = Int(tokens[object].end)
        var key = object + 1
        while key < end {
            let token = tokens[key]
            keys.append(String(decoding: bytes[Int(token.start)..<Int(token.end)], as: UTF8.self))
            key = StoredJSONScanner.next(after: key + 1, in: tokens)
        }
        return keys
    }

    func requireKind(_ kind: StoredJSONToken.Kind, at token: Int) throws(StoredJSONDecoder.Fallback) {
        guard tokens[token].kind == kind else { throw fallback() }
    }

    // MARK: Scalars

    func isNull(at token: Int) -> Bool {
        tokens[token].kind == .null
    }

    func bool(at token: Int) throws(StoredJSONDecoder.Fallback) -> Bool {
        switch tokens[token].kind {
        case .true: true
        case .false: false
        default: throw fallback()
        }
    }

    func string(at token: Int) throws(StoredJSONDecoder.Fallback) -> String {
        let string = tokens[token]
        guard string.kind == .string else { throw fallback() }
        let range = Int(string.start)..<Int(string.end)
        if string.simple { return String(decoding: bytes[range], as: UTF8.self) }
        return Self.unescaped(bytes[range])
    }

    /// The text of a string that has escapes, which the scanner has checked: each is complete, and surrogates pair.
    private static func unescaped(_ text: ArraySlice<UInt8>) -> String {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(text.count)
        var index = text.startIndex
        while index < text.endIndex {
            let byte = text[index]
            guard byte == UInt8(ascii: "\\") else {
                utf8.append(byte)
                index += 1
                continue
            }
            let escaped = text[index + 1]
            index += 2
            switch escaped {
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hexadecimalUnit(text, at: index)
                index += 4
                if (0xD800...0xDBFF).contains(scalar) {
                    let low = hexadecimalUnit(text, at: index + 2)
                    index += 6
                    scalar = 0x10000 + (scalar - 0xD800) << 10 + (low - 0xDC00)
                }
                utf8.append(contentsOf: Unicode.UTF8.encode(Unicode.Scalar(scalar)!)!)
            default: utf8.append(escaped)  // " \ and /
            }
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    private static func hexadecimalUnit(_ text: ArraySlice<UInt8>, at index: Int) -> UInt32 {
        var unit: UInt32 = 0
        for byte in text[index..<index + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: digit = byte - UInt8(ascii: "A") + 10
            }
            unit = unit << 4 | UInt32(digit)
        }
        return unit
    }

    /// An integer written plainly (no fraction, no exponent, not `-0`) that `I` holds.
    func integer<I: FixedWidthInteger>(_: I.Type, at token: Int) throws(StoredJSONDecoder.Fallback) -> I {
        let number = tokens[token]
        guard number.kind == .number, number.simple else { throw fallback() }
        var index = Int(number.start)
        let end = Int(number.end)
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative {
            index += 1
            guard I.isSigned, bytes[index] != UInt8(ascii: "0") else { throw fallback() }
        }
        var value: I = 0
        while index < end {
            let digit = I(bytes[index] &- UInt8(ascii: "0"))
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) =
                negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            guard !overflow, !carry else { throw fallback() }
            value = sum
            index += 1
        }
        return value
    }

    /// A number as a `Double`, read as `JSONDecoder` reads it (correctly rounded), and refused where it refuses it.
    func double(at token: Int) throws(StoredJSONDecoder.Fallback) -> Double {
        try floatingPoint(Double.self, at: token, exactDigits: 15)
    }

    /// A number as a `Float`, read from its text (not through a `Double`, which could round twice), as `JSONDecoder`
    /// reads it.
    func float(at token: Int) throws(StoredJSONDecoder.Fallback) -> Float {
        try floatingPoint(Float.self, at: token, exactDigits: 7)
    }

    /// An integer of at most `exactDigits` digits is exact in `F`, so it is converted without reading its text; any
    /// other number is read from its text by the standard library, which rounds correctly, as `strtod` and `strtof`
    /// do for `JSONDecoder`.
    private func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(
        _: F.Type, at token: Int, exactDigits: Int
    ) throws(StoredJSONDecoder.Fallback) -> F {
        let number = tokens[token]
        guard number.kind == .number else { throw fallback() }
        let range = Int(number.start)..<Int(number.end)
        let negative = bytes[range.lowerBound] == UInt8(ascii: "-")
        if number.simple, range.count - (negative ? 1 : 0) <= exactDigits {
            var magnitude = 0
            for byte in bytes[(negative ? range.lowerBound + 1 : range.lowerBound)..<range.upperBound] {
                magnitude = magnitude * 10 + Int(byte &- UInt8(ascii: "0"))
            }
            let value = F(magnitude)
            return negative ? -value : value  // -0 stays negative, as strtod reads it
        }
        guard let value = F(String(decoding: bytes[range], as: UTF8.self)) else { throw fallback() }
        let fits = bytes.withUnsafeBufferPointer { buffer in
            StoredJSONScanner.isRepresentable(value, text: buffer[range])
        }
        guard fits else { throw fallback() }
        return value
    }
}
