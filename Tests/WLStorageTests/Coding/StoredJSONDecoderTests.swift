import Foundation
import Testing

@testable import WLStorage

// The decoder of stored bytes against `JSONDecoder`: on every text, it throws or makes the value `JSONDecoder` makes.
// The texts come from a seeded generator that follows the shapes of the types below, with deviations (wrong kinds,
// missing and repeated keys, numbers and strings spelled every way JSON allows, and some ways it does not).

// MARK: Types

struct DecodedInner: Codable, Equatable {
    var x: Float
    var y: Int8?
    var label: String?
}

struct DecodedSettings: Codable, Equatable {
    var name: String
    var count: Int
    var enabled: Bool
    var ratio: Double?
    var tags: [String]
    var inner: DecodedInner?
}

struct DecodedWidths: Codable, Equatable {
    var i: Int
    var i8: Int8
    var i16: Int16
    var i32: Int32
    var i64: Int64
    var u: UInt
    var u8: UInt8
    var u16: UInt16
    var u32: UInt32
    var u64: UInt64
}

struct DecodedFloats: Codable, Equatable {
    var d: Double
    var f: Float
    var ds: [Double]
    var fs: [Float]?
}

enum DecodedColor: String, Codable, Equatable {
    case red, green, blue
}

enum DecodedLevel: Int, Codable, Equatable {
    case low = 1
    case high = 10
}

enum DecodedFigure: Codable, Equatable {
    case circle(radius: Double)
    case rect(w: Int, h: Int)
    case none
    case labeled(String)
}

struct DecodedMaps: Codable, Equatable {
    var byName: [String: Int]
    var byNumber: [Int: String]
    var colors: [DecodedColor]
    var level: DecodedLevel?
    var figures: [DecodedFigure]
}

/// Records the coding path it is decoded at, and what its value is, through the single-value container.
struct DecodedPathProbe: Codable, Equatable {
    var path: String
    var isNull: Bool
    var text: String?

    init(from decoder: any Decoder) throws {
        path = describe(decoder.codingPath)
        let container = try decoder.singleValueContainer()
        isNull = container.decodeNil()
        text = isNull ? nil : try? container.decode(String.self)
    }
}

struct DecodedTracked: Codable, Equatable {
    var one: DecodedPathProbe
    var items: [DecodedPathProbe]
    var map: [String: DecodedPathProbe]
    var nested: [[DecodedPathProbe]]?
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// The keys of an object, in the order `allKeys` gives them: a value that depends on an order `JSONDecoder` leaves open.
struct DecodedKeyList: Codable, Equatable {
    var keys: [String]

    init(from decoder: any Decoder) throws {
        keys = try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
    }
}

/// Decodes itself by hand: a super decoder, nested containers, `contains`, `decodeNil` and coding paths.
struct DecodedByHand: Codable, Equatable {
    var hasX: Bool
    var base: DecodedInner
    var numbers: [Int?]
    var rest: [String]
    var paths: [String]

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        hasX = container.contains(AnyKey("x"))
        let superDecoder = try container.superDecoder()
        base = try DecodedInner(from: superDecoder)
        paths = [describe(superDecoder.codingPath)]
        let nested = try container.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("n"))
        paths.append(describe(nested.codingPath))
        var list = try nested.nestedUnkeyedContainer(forKey: AnyKey("list"))
        paths.append(describe(list.codingPath))
        numbers = []
        while !list.isAtEnd, numbers.count < 3 {
            if try list.decodeNil() {
                numbers.append(nil)
            } else {
                numbers.append(try list.decode(Int.self))
            }
        }
        rest = []
        if !list.isAtEnd {
            let element = try list.superDecoder()
            paths.append(describe(element.codingPath))
            var inner = try element.unkeyedContainer()
            while !inner.isAtEnd { rest.append(try inner.decode(String.self)) }
        }
        if container.contains(AnyKey("x")), try !container.decodeNil(forKey: AnyKey("x")) {
            let x = try container.superDecoder(forKey: AnyKey("x"))
            paths.append(describe(x.codingPath))
            rest.append(try x.singleValueContainer().decode(String.self))
        }
    }
}

private func describe(_ path: [any CodingKey]) -> String {
    path.map { "\($0.stringValue)#\($0.intValue.map(String.init) ?? "-")" }.joined(separator: "/")
}

// MARK: Shapes and texts

/// The JSON shape of a type, which the generator follows.
indirect enum JSONShape: Sendable {
    case integer(min: String, max: String)
    case double, float, bool, string
    case optional(JSONShape)
    case array(JSONShape)
    case object([(String, JSONShape)])
    case stringMap(JSONShape)
    case intMap(JSONShape)
    case oneOf([String])
    case anyScalar

    static let inner = object([
        ("x", .float), ("y", .optional(.integer(min: "-128", max: "127"))), ("label", .optional(.string)),
    ])
    static let int = integer(min: "-9223372036854775808", max: "9223372036854775807")
    static let settings = object([
        ("name", .string), ("count", .int), ("enabled", .bool), ("ratio", .optional(.double)),
        ("tags", .array(.string)),
        ("inner", .optional(inner)),
    ])
    static let widths = object([
        ("i", .int), ("i8", .integer(min: "-128", max: "127")), ("i16", .integer(min: "-32768", max: "32767")),
        ("i32", .integer(min: "-2147483648", max: "2147483647")), ("i64", .int),
        ("u", .integer(min: "0", max: "18446744073709551615")), ("u8", .integer(min: "0", max: "255")),
        ("u16", .integer(min: "0", max: "65535")), ("u32", .integer(min: "0", max: "4294967295")),
        ("u64", .integer(min: "0", max: "18446744073709551615")),
    ])
    static let floats = object([
        ("d", .double), ("f", .float), ("ds", .array(.double)), ("fs", .optional(.array(.float))),
    ])
    static let figure = oneOfObjects([
        ("circle", .object([("radius", .double)])), ("rect", .object([("w", .int), ("h", .int)])),
        ("none", .object([])), ("labeled", .object([("_0", .string)])),
    ])
    static let maps = object([
        ("byName", .stringMap(.int)), ("byNumber", .intMap(.string)),
        ("colors", .array(.oneOf(["red", "green", "blue"]))),
        ("level", .optional(.integer(min: "10", max: "10"))), ("figures", .array(figure)),
    ])
    static let tracked = object([
        ("one", .anyScalar), ("items", .array(.anyScalar)), ("map", .stringMap(.anyScalar)),
        ("nested", .optional(.array(.array(.anyScalar)))),
    ])
    static let byHand = object([
        ("super", inner), ("n", .object([("list", .array(.optional(.int)))])), ("x", .optional(.string)),
    ])

    /// An enum with associated values: an object with one of the cases as its only key.
    static func oneOfObjects(_ cases: [(String, JSONShape)]) -> JSONShape {
        .stringMap(.object(cases.flatMap { $0.1.members }))  // the generator picks one case, see below
    }

    var members: [(String, JSONShape)] {
        if case .object(let members) = self { return members }
        return []
    }
}

/// A deterministic generator (SplitMix64), so that a seed replays its texts.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
    mutating func pick<C: Collection>(_ items: C) -> C.Element { items.randomElement(using: &self)! }
}

/// Writes JSON texts of a shape, as bytes, spelled in random ways, with random deviations from the shape.
struct JSONTextGenerator {
    var random: SeededGenerator
    /// How much noise a text gets: deviations from its shape, odd spellings, texts that are not JSON. Half the texts
    /// get none, so that types of many fields are read whole.
    var noise = 1.0

    init(random: SeededGenerator) {
        self.random = random
    }

    private mutating func chance(_ probability: Double) -> Bool { random.chance(probability * noise) }

    mutating func text(_ shape: JSONShape) -> [UInt8] {
        noise = random.chance(0.5) ? 0 : 1
        var out: [UInt8] = []
        if chance(0.01) { out += [0xEF, 0xBB, 0xBF] }
        space(&out)
        value(shape, into: &out, depth: 0)
        space(&out)
        if chance(0.01) { out += random.pick([Array("x".utf8), Array("}".utf8), [0]]) }
        if chance(0.01), !out.isEmpty { out.removeLast(Int.random(in: 1...out.count, using: &random)) }
        return out
    }

    private mutating func space(_ out: inout [UInt8]) {
        guard random.chance(0.2) else { return }
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            out.append(random.pick(Array(" \t\n\r".utf8) + (chance(0.05) ? [0x0B, 0x0C] : [])))
        }
    }

    private mutating func value(_ shape: JSONShape, into out: inout [UInt8], depth: Int) {
        if chance(0.04) { return anything(into: &out, depth: depth) }
        switch shape {
        case .integer(let min, let max): out += Array(integer(min: min, max: max).utf8)
        case .double: out += Array(floating(float: false).utf8)
        case .float: out += Array(floating(float: true).utf8)
        case .bool: out += Array(random.pick(["true", "false"]).utf8)
        case .string: string(randomText(), into: &out)
        case .optional(let wrapped):
            if random.chance(0.3) { out += Array("null".utf8) } else { value(wrapped, into: &out, depth: depth) }
        case .array(let element):
            let count = random.chance(0.1) ? 0 : Int.random(in: 1...4, using: &random)
            container("[", "]", count: count, into: &out) { generator, out, _ in
                generator.value(element, into: &out, depth: depth + 1)
            }
        case .object(let members):
            object(members, into: &out, depth: depth)
        case .stringMap(let element):
            if case .object(let cases) = element {
                // An enum with associated values: one case, its payload an object.
                let chosen = random.pick(cases.isEmpty ? [("none", JSONShape.object([]))] : cases)
                let payload: JSONShape =
                    chosen.0 == "radius"
                    ? .object([chosen])
                    : chosen.0 == "_0" ? .object([chosen]) : .object(random.chance(0.5) ? [] : [chosen])
                let name =
                    ["radius": "circle", "w": "rect", "h": "rect", "_0": "labeled"][chosen.0]
                    ?? random.pick(["none", "circle", "other"])
                let fixed: JSONShape =
                    name == "rect" ? .object([("w", .int), ("h", .int)]) : payload
                return object(
                    [(name, fixed)] + (chance(0.05) ? [("extra", .int)] : []), into: &out, depth: depth, extras: false)
            }
            let count = Int.random(in: 0...3, using: &random)
            let names = (0..<count).map { _ in
                chance(0.3)
                    ? random.pick(["Ä", "e\u{301}", "\u{E9}", "n\\u0061me", "\u{212A}"])
                    : random.pick(["a", "b", "key", "K", "super"])
            }
            object(unique(names).map { ($0, element) }, into: &out, depth: depth, extras: false)
        case .intMap(let element):
            let count = Int.random(in: 0...3, using: &random)
            let names = (0..<count).map { _ in
                chance(0.3)
                    ? random.pick(["1.0", "x", "9223372036854775808", "007", "+42", "-0"])
                    : random.pick(["0", "-1", "42", "7", "-9223372036854775808"])
            }
            object(unique(names).map { ($0, element) }, into: &out, depth: depth, extras: false)
        case .oneOf(let names):
            string(chance(0.1) ? "purple" : random.pick(names), into: &out)
        case .anyScalar:
            if noise == 0 {
                random.chance(0.2) ? out += Array("null".utf8) : string(randomText(), into: &out)
            } else {
                anything(into: &out, depth: depth + 5)
            }
        }
    }

    private mutating func object(
        _ members: [(String, JSONShape)], into out: inout [UInt8], depth: Int, extras: Bool = true
    ) {
        var members = members
        if chance(0.1), !members.isEmpty { members.remove(at: Int.random(in: 0..<members.count, using: &random)) }
        if extras, random.chance(0.1) { members.append((random.pick(["unknown", "extra", "x"]), .anyScalar)) }
        if chance(0.05), let first = members.first { members.append(first) }  // a key twice
        if random.chance(0.5) { members.shuffle(using: &random) }
        container("{", "}", count: members.count, into: &out) { generator, out, index in
            generator.key(members[index].0, into: &out)
            generator.space(&out)
            out.append(UInt8(ascii: ":"))
            generator.space(&out)
            generator.value(members[index].1, into: &out, depth: depth + 1)
        }
    }

    private mutating func container(
        _ open: Character, _ close: Character, count: Int, into out: inout [UInt8],
        _ element: (inout JSONTextGenerator, inout [UInt8], Int) -> Void
    ) {
        out.append(open.asciiValue!)
        for index in 0..<count {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            space(&out)
            element(&self, &out, index)
            space(&out)
        }
        if chance(0.01) { out.append(UInt8(ascii: ",")) }  // a trailing comma: not JSON
        out.append(close.asciiValue!)
    }

    /// A key as written: plainly, or with an escape now and then (`\u0061`).
    private mutating func key(_ name: String, into out: inout [UInt8]) {
        if name.contains("\\") {
            out += Array("\"\(name)\"".utf8)
        } else {
            string(name, into: &out, escapes: 0.05 * noise)
        }
    }

    /// `names` without repeats, unless the text is noisy.
    private mutating func unique(_ names: [String]) -> [String] {
        guard noise == 0 else { return names }
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }

    private mutating func string(_ text: String, into out: inout [UInt8], escapes: Double = 0.2) {
        out.append(UInt8(ascii: "\""))
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += Array(#"\""#.utf8)
            case "\\": out += Array(#"\\"#.utf8)
            case "\n": out += Array(random.pick([#"\n"#, #"\u000a"#, #"\u000A"#]).utf8)
            case "\u{0}"..."\u{1F}": out += Array(String(format: "\\u%04x", scalar.value).utf8)
            default:
                if random.chance(escapes) {
                    if scalar.value > 0xFFFF {
                        let value = scalar.value - 0x10000
                        out += Array(
                            String(format: "\\u%04X\\u%04x", 0xD800 + (value >> 10), 0xDC00 + (value & 0x3FF)).utf8)
                    } else if scalar == "/" {
                        out += Array(#"\/"#.utf8)
                    } else {
                        out += Array(String(format: "\\u%04x", scalar.value).utf8)
                    }
                } else {
                    out += Array(String(scalar).utf8)
                }
            }
        }
        if chance(0.01) {
            // Not a string JSON allows, or not one of UTF-8.
            out += random.pick([
                Array(#"\ud83d"#.utf8), Array(#"\udc00x"#.utf8), Array(#"\ud83d\u0041"#.utf8), [0x01], [0xFF],
                [0xC0, 0xAF], [0xED, 0xA0, 0x80], Array(#"\x"#.utf8), Array(#"\u12"#.utf8), [0xE2, 0x82],
            ])
        }
        out.append(UInt8(ascii: "\""))
    }

    private mutating func randomText() -> String {
        let pieces = [
            "a", "Z", "hello", " ", "é", "e\u{301}", "€", "😀", "\u{10FFFF}", "\u{FEFF}", "\"", "\\", "/", "\n", "\t",
            "\u{0}", "\u{1F}", "\u{7F}", "\u{2028}", "K", "\u{212A}", "",
        ]
        return (0..<Int.random(in: 0...4, using: &random)).map { _ in random.pick(pieces) }.joined()
    }

    private mutating func integer(min: String, max: String) -> String {
        let minimum = Int128(min)!
        let maximum = Int128(max)!
        let value: Int128 = random.pick(
            (noise == 0 ? [] : [minimum - 1, maximum + 1]) + [
                minimum, maximum, Swift.max(minimum, 0), Swift.min(maximum, 1),
                Int128.random(in: Swift.max(minimum, -1000)...Swift.min(maximum, 1000), using: &random),
                Int128.random(in: minimum...maximum, using: &random),
            ])
        if !chance(0.15) { return String(value) }
        return random.pick([
            "\(value).0", "\(value)e0", "\(value)E+0", "\(value)0e-1", "-0", "-0.0", "0.5", "1e2", "\(value).000001",
            "0\(value)", "+\(value)", "\(value).", "1e400", "\(value)9999999999999999999999",
        ])
    }

    private mutating func floating(float: Bool) -> String {
        // Texts both types read, texts only a Double reads, and texts neither reads (or that are not JSON).
        let both = [
            "0", "-0", "0.0", "-0.0", "1", "-1", "0.1", "1.5", "1e2", "1E-2", "1e+2", "2.5e-3", "123456789012345678",
            "9007199254740993", "0.1000000000000000055511151231257827021181583404541015625", "3.4028234663852886e38",
            "1.17549435e-38", "1e-45", "1.4e-45", "16777217", "16777216.5", "1.00000005960464477539062500001",
            "0.00000000000000000000000000000000000000000000001", "123.456e-7", "-1.23456789012345678901234567890e-10",
            "0e400", "-0e-400", "0.30000000000000004", "5e-1",
        ]
        let doubleOnly = [
            "3.4028235677973366e38", "3.4028236e38", "7e-46", "1.7976931348623157e308", "2.2250738585072014e-308",
            "2.2250738585072011e-308", "4.9e-324", "2.4703282292062328e-324", "1e300",
        ]
        let neither = [
            "1.7976931348623159e308", "2e-324", "1e-400", "1e400", String(repeating: "1", count: 320),
            "0." + String(repeating: "0", count: 330) + "1", "1" + String(repeating: "0", count: 310), "1.", ".5",
            "01", "1e", "-", "NaN", "Infinity", "+1", "0x10",
        ]
        if random.chance(0.6) {
            return random.pick(
                both + (float ? [] : doubleOnly) + (noise == 0 ? [] : (float ? doubleOnly : []) + neither))
        }
        let bits = random.next()
        let value = float ? Double(Float(bitPattern: UInt32(truncatingIfNeeded: bits))) : Double(bitPattern: bits)
        guard value.isFinite else { return "2.5" }
        return random.pick([
            "\(value)", String(format: "%.17g", value), String(format: "%.25e", value), String(format: "%.9g", value),
            float ? "\(Float(value))" : "\(value)",
        ])
    }

    private mutating func anything(into out: inout [UInt8], depth: Int) {
        let choice = depth > 6 ? Int.random(in: 0..<5, using: &random) : Int.random(in: 0..<7, using: &random)
        switch choice {
        case 0: out += Array("null".utf8)
        case 1: out += Array(random.pick(["true", "false", "tru", "nul"]).utf8)
        case 2: out += Array(floating(float: false).utf8)
        case 3: out += Array(integer(min: "-100", max: "100").utf8)
        case 4: string(randomText(), into: &out)
        case 5: value(.array(.anyScalar), into: &out, depth: depth + 1)
        default: value(.stringMap(.anyScalar), into: &out, depth: depth + 1)
        }
    }
}

// MARK: Tests

/// What the decoder did on a set of texts.
struct DecoderTally {
    var decodedByBoth = 0
    var decodedByJSONDecoderOnly = 0
    var neither = 0
    var mismatches: [String] = []
    /// By type: how many texts both decoders read.
    var decodedByBothOf: [String: Int] = [:]

    mutating func check<T: Codable>(_ type: T.Type, _ bytes: [UInt8]) {
        let data = Data(bytes)
        let expected = try? JSONDecoder().decode(T.self, from: data)
        let lean = try? StoredJSONDecoder.decode(T.self, from: data)
        let text = String(decoding: bytes, as: UTF8.self).debugDescription
        switch (lean, expected) {
        case (nil, nil): neither += 1
        case (nil, _?): decodedByJSONDecoderOnly += 1
        case (_?, nil): mismatches.append("\(T.self) decoded where JSONDecoder throws: \(text)")
        case (let lean?, let expected?):
            decodedByBoth += 1
            decodedByBothOf["\(T.self)", default: 0] += 1
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            let leanJSON = (try? encoder.encode(lean)).map { String(decoding: $0, as: UTF8.self) }
            let expectedJSON = (try? encoder.encode(expected)).map { String(decoding: $0, as: UTF8.self) }
            if leanJSON != expectedJSON || leanJSON == nil {
                mismatches.append(
                    "\(T.self) from \(text): \(leanJSON ?? "?") but JSONDecoder made \(expectedJSON ?? "?")")
            }
        }
    }
}

@Suite struct StoredJSONDecoderTests {
    /// Decodes `count` generated texts of every shape with both decoders.
    static func tally(seed: UInt64, count: Int) -> DecoderTally {
        var generator = JSONTextGenerator(random: SeededGenerator(state: seed))
        var tally = DecoderTally()
        for _ in 0..<count {
            tally.check(DecodedSettings.self, generator.text(.settings))
            tally.check(DecodedWidths.self, generator.text(.widths))
            tally.check(DecodedFloats.self, generator.text(.floats))
            tally.check(DecodedMaps.self, generator.text(.maps))
            tally.check(DecodedTracked.self, generator.text(.tracked))
            tally.check(DecodedByHand.self, generator.text(.byHand))
            tally.check([DecodedInner].self, generator.text(.array(.inner)))
            tally.check([String: DecodedFigure].self, generator.text(.stringMap(JSONShape.figure)))
            tally.check(Double.self, generator.text(.double))
            tally.check(Float.self, generator.text(.float))
            tally.check(String.self, generator.text(.string))
            tally.check(Int8.self, generator.text(.integer(min: "-128", max: "127")))
            tally.check(UInt64.self, generator.text(.integer(min: "0", max: "18446744073709551615")))
            tally.check([Int?].self, generator.text(.array(.optional(.int))))
            tally.check(DecodedKeyList.self, generator.text(.stringMap(.anyScalar)))
            tally.check([Int: String].self, generator.text(.intMap(.string)))
            tally.check(Bool?.self, generator.text(.optional(.bool)))
        }
        return tally
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func onGeneratedTextsItThrowsOrMakesTheValueJSONDecoderMakes(seed: UInt64) {
        let tally = Self.tally(seed: seed, count: 400)
        #expect(tally.mismatches.isEmpty, "seed \(seed): \(tally.mismatches.prefix(5).joined(separator: "\n"))")
        // Not a decoder that always throws: most texts JSONDecoder reads, it reads too.
        #expect(tally.decodedByBoth > 2 * tally.decodedByJSONDecoderOnly, "seed \(seed): \(tally)")
        #expect(tally.decodedByBoth > 1_000, "seed \(seed): \(tally)")
        // Every type's texts are read, not only those of the simple types.
        #expect(tally.decodedByBothOf.count == 17, "seed \(seed): \(tally.decodedByBothOf)")
        #expect(tally.decodedByBothOf.values.allSatisfy { $0 >= 10 }, "seed \(seed): \(tally.decodedByBothOf)")
        print("seed \(seed): \(tally.decodedByBothOf)")
    }

    // MARK: What it decodes itself

    @Test func theCommonShapesDecodeWithoutFallingBack() throws {
        let settings =
            #"{"count":3,"enabled":true,"inner":{"label":"a\"b\\c\n\u00e9\ud83d\ude00","x":1.5,"y":-128},"name":"n","ratio":null,"tags":["x","é"]}"#
        #expect(
            try StoredJSONDecoder.decode(DecodedSettings.self, from: Data(settings.utf8))
                == DecodedSettings(
                    name: "n", count: 3, enabled: true, ratio: nil, tags: ["x", "é"],
                    inner: DecodedInner(x: 1.5, y: -128, label: "a\"b\\c\né😀")))
        let widths =
            #"{"i":-9223372036854775808,"i16":32767,"i32":-2147483648,"i64":9223372036854775807,"i8":127,"u":0,"u16":65535,"u32":4294967295,"u64":18446744073709551615,"u8":255}"#
        #expect(
            try StoredJSONDecoder.decode(DecodedWidths.self, from: Data(widths.utf8))
                == DecodedWidths(
                    i: .min, i8: .max, i16: .max, i32: .min, i64: .max, u: 0, u8: .max, u16: .max, u32: .max,
                    u64: .max))
        let maps =
            #"{"byName":{"a":1,"b":2},"byNumber":{"-1":"x","7":"y"},"colors":["red","blue"],"figures":[{"circle":{"radius":2}},{"rect":{"h":2,"w":1}},{"none":{}},{"labeled":{"_0":"t"}}],"level":10}"#
        #expect(
            try StoredJSONDecoder.decode(DecodedMaps.self, from: Data(maps.utf8))
                == DecodedMaps(
                    byName: ["a": 1, "b": 2], byNumber: [-1: "x", 7: "y"], colors: [.red, .blue], level: .high,
                    figures: [.circle(radius: 2), .rect(w: 1, h: 2), .none, .labeled("t")]))
        let floats = #"{"d":-0,"ds":[1e-5,2.5E3,4.9e-324,1.7976931348623157e308],"f":3.4028234e38}"#
        let decoded = try StoredJSONDecoder.decode(DecodedFloats.self, from: Data(floats.utf8))
        #expect(decoded.d == 0 && decoded.d.sign == .minus)
        #expect(decoded.ds == [1e-5, 2500, .leastNonzeroMagnitude, .greatestFiniteMagnitude])
        #expect(decoded.f == .greatestFiniteMagnitude)
        #expect(decoded.fs == nil)
        let probe = #"{"items":["i",null],"map":{"k":"v"},"nested":[[null]],"one":"o"}"#
        let tracked = try StoredJSONDecoder.decode(DecodedTracked.self, from: Data(probe.utf8))
        #expect(tracked.one.path == "one#-")
        #expect(tracked.items.map(\.path) == ["items#-/Index 0#0", "items#-/Index 1#1"])
        #expect(tracked.map["k"]?.path == "map#-/k#-")
        #expect(tracked.nested?.first?.first?.path == "nested#-/Index 0#0/Index 0#0")
        let byHand = #"{"n":{"list":[1,null,3,["a","b"]]},"super":{"x":2}}"#
        let hand = try StoredJSONDecoder.decode(DecodedByHand.self, from: Data(byHand.utf8))
        #expect(hand.numbers == [1, nil, 3])
        #expect(hand.rest == ["a", "b"])
        #expect(hand.paths == ["super#-", "n#-", "n#-/list#-", "n#-/list#-/Index 3#3"])
    }

    // MARK: What it leaves to JSONDecoder

    @Test(arguments: [
        #"{"count":1.0,"enabled":true,"name":"n","tags":[]}"#, #"{"count":1e2,"enabled":true,"name":"n","tags":[]}"#,
        #"{"count":-0,"enabled":true,"name":"n","tags":[]}"#,
        #"{"count":9223372036854775808,"enabled":true,"name":"n","tags":[]}"#,
        #"{"count":1,"count":2,"enabled":true,"name":"n","tags":[]}"#,
        #"{"co\u0075nt":1,"enabled":true,"name":"n","tags":[]}"#,
        "\u{FEFF}{\"count\":1,\"enabled\":true,\"name\":\"n\",\"tags\":[]}",
        #"{"count":1,"enabled":true,"name":"\ud800","tags":[]}"#,
        "{\"count\":1,\"enabled\":true,\"name\":\"\u{1}\",\"tags\":[]}",
        #"{"count":1,"enabled":true,"name":"n","tags":[],"unknown":1e400}"#,
        #"{"count":1,"enabled":true,"name":"n","tags":[]} x"#, #"{"count":1,"enabled":1,"name":"n","tags":[]}"#,
        #"{"enabled":true,"name":"n","tags":[]}"#,
    ])
    func aTextItIsNotSureOfFallsBack(text: String) {
        #expect(throws: StoredJSONDecoder.Fallback.self) {
            try StoredJSONDecoder.decode(DecodedSettings.self, from: Data(text.utf8))
        }
    }

    struct Special: Codable, Equatable {
        var date: Date
        var data: Data
        var url: URL
        var decimal: Decimal
    }

    @Test func theTypesJSONDecoderDecodesItsOwnWayFallBackAtAnyDepth() throws {
        let text = #"{"data":"AQI=","date":1000,"decimal":1.25,"url":"https://example.com/a"}"#
        #expect(throws: StoredJSONDecoder.Fallback.self) {
            try StoredJSONDecoder.decode(Special.self, from: Data(text.utf8))
        }
        for inner in [#"[1000]"#, #"["AQI="]"#, #"["https://example.com"]"#, #"[1.5]"#] {
            for type in [[Date].self, [Data].self, [URL].self, [Decimal].self] as [any Decodable.Type] {
                #expect(throws: StoredJSONDecoder.Fallback.self) {
                    try StoredJSONDecoder.decode(type, from: Data(inner.utf8))
                }
            }
        }
        #expect(throws: StoredJSONDecoder.Fallback.self) {
            try StoredJSONDecoder.decode(Int128.self, from: Data("1".utf8))
        }
    }

    /// A type that catches the decoder's error and goes on: the value it makes is not trusted.
    struct Forgiving: Decodable {
        var count: Int
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            count = (try? container.decode(Int.self, forKey: AnyKey("count"))) ?? -1
        }
    }

    @Test func anErrorATypeCatchesStillMakesTheDecodeFallBack() {
        #expect(throws: StoredJSONDecoder.Fallback.self) {
            try StoredJSONDecoder.decode(Forgiving.self, from: Data(#"{"count":1.0}"#.utf8))
        }
    }
}
