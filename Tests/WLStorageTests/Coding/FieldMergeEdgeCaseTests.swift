// Edge cases of the three-way merge of JSON (`FieldMerge`) that reads bytes: what other programs may write, checked
// against what `JSONDecoder` reads, and against the merge through decoded values that it replaced.
import Foundation
import Testing
import WLStorageFleet
import WLStorageJSON
import WLStorageTestSupport

@testable import WLStorage

@Suite(.onTestThreads) struct FieldMergeEdgeCaseTests {
    func merge(_ base: String, _ value: String, _ stored: String, replacingCases: Bool = false) -> Data? {
        FieldMerge.merge(
            base: Data(base.utf8), value: Data(value.utf8), stored: Data(stored.utf8), replacingCases: replacingCases)
    }

    /// What `JSONDecoder` reads from `data`, numbers as `Double`s where one holds them exactly enough to compare.
    func read(_ data: Data?) -> Reading? {
        guard let data else { return nil }
        return try? JSONDecoder().decode(Reading.self, from: data)
    }

    func read(_ text: String) -> Reading? { read(Data(text.utf8)) }

    // MARK: Duplicate keys: `JSONDecoder` reads the first of a name.

    @Test func theDecoderReadsTheFirstOfADuplicateKey() throws {
        struct Probe: Decodable { var b: String }
        #expect(try JSONDecoder().decode(Probe.self, from: Data(#"{"b":"first","b":"second"}"#.utf8)).b == "first")
    }

    /// Another program's duplicate key in a member the writer left: the merge must keep what the decoder read there.
    @Test func aDuplicateKeyInStoredKeepsTheValueTheDecoderReads() {
        let merged = merge(
            #"{"a":1,"b":"first"}"#, #"{"a":2,"b":"first"}"#, #"{"a":1,"b":"first","b":"second"}"#)
        #expect(read(merged) == read(#"{"a":2,"b":"first"}"#))
        #expect(
            read(merged)
                == read(
                    DecodedValueMerge.merge(
                        base: #"{"a":1,"b":"first"}"#, value: #"{"a":2,"b":"first"}"#,
                        stored: #"{"a":1,"b":"first","b":"second"}"#)))
    }

    /// A duplicate key holding objects: the members of the object the decoder read are kept, none lost.
    @Test func aDuplicateKeyedObjectInStoredKeepsTheMembersTheDecoderReads() {
        let merged = merge(#"{"o":{"x":1}}"#, #"{"o":{"x":5}}"#, #"{"o":{"x":1,"k":3},"o":{"y":2}}"#)
        #expect(read(merged) == read(#"{"o":{"k":3,"x":5}}"#))
    }

    /// The same name spelled with an escape and without, twice in one object, is a duplicate key too.
    @Test func aKeySpelledBothWaysInOneObjectKeepsTheValueTheDecoderReads() {
        let stored = #"{"a":1,"caf\u00e9":"escaped","café":"plain"}"#
        #expect(read(stored) == read(#"{"a":1,"café":"escaped"}"#))
        let merged = merge(#"{"a":1}"#, #"{"a":2}"#, stored)
        #expect(read(merged) == read(#"{"a":2,"café":"escaped"}"#))
    }

    // MARK: What Foundation reads that the byte parser does not.

    @Test func foundationReadsTrailingCommas() {
        #expect(read(#"{"a":1,"b":2,}"#) == read(#"{"a":1,"b":2}"#))
    }

    /// Another program's object with a trailing comma is JSON to the decoder: the merge must not give up on it (the
    /// caller then writes the writer's value whole, dropping the other program's change).
    @Test func storedWithATrailingCommaStillMerges() {
        let merged = merge(#"{"a":1,"b":1}"#, #"{"a":2,"b":1}"#, #"{"a":1,"b":3,}"#)
        #expect(read(merged) == read(#"{"a":2,"b":3}"#))
        let nested = merge(#"{"a":1,"o":{"x":1}}"#, #"{"a":2,"o":{"x":1}}"#, #"{"a":1,"o":{"x":7,},}"#)
        #expect(read(nested) == read(#"{"a":2,"o":{"x":7}}"#))
    }

    /// `JSONDecoder` reads UTF-16 (with or without a byte order mark), as some programs write text files.
    @Test func storedInUTF16StillMerges() throws {
        for encoding in [String.Encoding.utf16, .utf16LittleEndian, .utf16BigEndian] {
            let stored = try #require(#"{"a":1,"b":3}"#.data(using: encoding))
            #expect(read(stored) == read(#"{"a":1,"b":3}"#))
            let merged = FieldMerge.merge(
                base: Data(#"{"a":1,"b":1}"#.utf8), value: Data(#"{"a":2,"b":1}"#.utf8), stored: stored)
            #expect(read(merged) == read(#"{"a":2,"b":3}"#), "\(encoding)")
        }
    }

    /// A writer that changed nothing over UTF-16 that another program stored: what is stored, as the decoder reads
    /// it, never a piece of it.
    @Test func anUnchangedValueOverStoredUTF16IsWhatIsStored() throws {
        let stored = try #require(#"{"a":1,"b":3}"#.data(using: .utf16BigEndian))
        let merged = FieldMerge.merge(
            base: Data(#"{"a":1,"b":1}"#.utf8), value: Data(#"{"a":1,"b":1}"#.utf8), stored: stored)
        #expect(read(merged) == read(#"{"a":1,"b":3}"#))
    }

    @Test func aByteOrderMarkIsReadAndNotWritten() {
        let stored = Data([0xEF, 0xBB, 0xBF]) + Data(#"{"a":1,"b":3}"#.utf8)
        let merged = FieldMerge.merge(
            base: Data(#"{"a":1,"b":1}"#.utf8), value: Data(#"{"a":2,"b":1}"#.utf8), stored: stored)
        #expect(merged.map { String(decoding: $0, as: UTF8.self) } == #"{"a":2,"b":3}"#)
        // Unchanged: what is stored, which the decoder reads as before.
        let kept = FieldMerge.merge(
            base: Data(#"{"a":1}"#.utf8), value: Data(#"{"a":1}"#.utf8), stored: stored)
        #expect(read(kept) == read(#"{"a":1,"b":3}"#))
    }

    // MARK: Numbers compared as Decimals.

    /// A writer that re-spells a number it did not change (`1.0e-128` read, `1e-128` written, as its encoder writes
    /// the same `Double`) changed nothing: another program's value there stays.
    @Test func theSameNumberSpelledInsideAndOutsideADecimalsRangeIsNoChange() {
        #expect(read(#"[1.0e-128]"#) == read(#"[1e-128]"#))
        let merged = merge(#"{"a":1,"x":1.0e-128}"#, #"{"a":1,"x":1e-128}"#, #"{"a":1,"x":5}"#)
        #expect(read(merged) == read(#"{"a":1,"x":5}"#))
    }

    /// Numbers that differ past a `Decimal`'s 38 digits are different numbers: the writer's change is written. Known
    /// not to hold yet: values are compared as `Decimal`s, which keep 38 digits (a writer through `JSONEncoder` writes
    /// more only for a type that encodes them itself). The day it holds, this test fails: remove the known issue.
    @Test func numbersDifferingPastADecimalsDigitsAreAChange() {
        withKnownIssue("numbers are compared to a Decimal's 38 digits") {
            numbersDifferingPastADecimalsDigitsAreMerged()
        }
    }

    private func numbersDifferingPastADecimalsDigitsAreMerged() {
        let merged = merge(
            #"{"n":123456789012345678901234567890123456789012}"#,
            #"{"n":123456789012345678901234567890123456789999}"#, #"{"n":1,"s":1}"#)
        #expect(
            merged.map { String(decoding: $0, as: UTF8.self) }
                == #"{"n":123456789012345678901234567890123456789999,"s":1}"#)
        let fraction = merge(
            #"{"f":0.1234567890123456789012345678901234567891}"#,
            #"{"f":0.1234567890123456789012345678901234567892}"#, #"{"f":1}"#)
        #expect(
            fraction.map { String(decoding: $0, as: UTF8.self) } == #"{"f":0.1234567890123456789012345678901234567892}"#
        )
    }

    /// Distinct `Double`s, in and out of a `Decimal`'s range, are changes.
    @Test func distinctDoublesAtTheLimitsAreChanges() {
        let pairs = [
            ("1e308", "1.7976931348623157e308"), ("1e-300", "2e-300"),
            ("1.2345678901234567e-115", "1.2345678901234568e-115"),
            ("1e127", "1e128"), ("1e-128", "1e-129"), ("9007199254740992", "9007199254740993"),
            ("18446744073709551615", "18446744073709551614"), ("-1", "1"), ("0.1", "0.10000000000000001"),
        ]
        for (old, new) in pairs {
            let merged = merge(#"{"n":\#(old)}"#, #"{"n":\#(new)}"#, #"{"n":3}"#)
            #expect(merged.map { String(decoding: $0, as: UTF8.self) } == #"{"n":\#(new)}"#, "\(old) → \(new)")
        }
    }

    /// Spellings of one number are no change, and another program's spelling is kept.
    @Test func spellingsOfOneNumberAreNoChangeAndStoredBytesStay() {
        let pairs = [("1", "1.0"), ("100", "1e2"), ("0", "-0"), ("1e-400", "0"), ("1.5", "15e-1"), ("1E+2", "100")]
        for (old, new) in pairs {
            let merged = merge(#"{"a":1,"n":\#(old)}"#, #"{"a":2,"n":\#(new)}"#, #"{"a":1,"n":  -0.0e-5 }"#)
            #expect(merged.map { String(decoding: $0, as: UTF8.self) } == #"{"a":2,"n":-0.0e-5}"#, "\(old) → \(new)")
        }
        // Nothing changed: what is stored, as it is.
        #expect(
            merge("1", "1.0", #" {"n":  -0.0e-5 } "#).map { String(decoding: $0, as: UTF8.self) }
                == #"{"n":  -0.0e-5 }"#)
    }

    // MARK: Keys, whitespace, nesting, shapes.

    @Test func aKeyEscapedInOneTextAndPlainInAnotherIsOneMember() {
        let merged = merge(#"{"café":1,"b":1}"#, #"{"caf\u00e9":2,"b":1}"#, #"{"caf\u00E9":1,"b":3}"#)
        #expect(read(merged) == read(#"{"b":3,"café":2}"#))
        // Removed by the writer under the other spelling: gone.
        let removed = merge(#"{"café":1,"b":1}"#, #"{"b":1}"#, #"{"caf\u00e9":1,"b":3}"#)
        #expect(read(removed) == read(#"{"b":3}"#))
    }

    @Test func keysWithEscapesAndUnicodeAreWrittenAsValidJSON() {
        let stored = #"{"a\"b":1,"\\":2,"\ud83d\ude00":"\u0000x","line\nbreak":"\/","":{},"é":"\u00e9"}"#
        let merged = merge(#"{"z":1}"#, #"{"z":2}"#, stored)
        #expect(read(merged) == read(#"{"a\"b":1,"\\":2,"😀":"\u0000x","line\nbreak":"/","":{},"é":"é","z":2}"#))
        #expect(merged.flatMap { try? JSONSerialization.jsonObject(with: $0) } != nil)
    }

    @Test func whitespaceAroundAndInsideValuesIsReadAndMembersAreWrittenValid() {
        let stored =
            " \n\t{ \"a\" :\t1 ,\r\n \"o\" : { \"x\" : [ 1 , { \"y\" : \"}\" } ] , \"s\" : \"]\\\"\" } , \"t\":true } \n"
        let base = #"{"a":1,"o":{"x":[1,{"y":"}"}],"s":"]\""},"t":true}"#
        let value = #"{"a":2,"o":{"x":[1,{"y":"}"}],"s":"changed"},"t":true}"#
        let merged = merge(base, value, stored)
        #expect(read(merged) == read(#"{"a":2,"o":{"x":[1,{"y":"}"}],"s":"changed"},"t":true}"#))
        #expect(merged.flatMap { try? JSONSerialization.jsonObject(with: $0) } != nil)
    }

    @Test func nestedObjectsSeveralLevelsDeepMergeAtEachLevel() {
        let base = #"{"l1":{"l2":{"l3":{"l4":{"l5":{"a":1,"b":1}},"c":1}}}}"#
        let value = #"{"l1":{"l2":{"l3":{"l4":{"l5":{"a":2,"b":1}},"c":1}}}}"#
        let stored = #"{"l1":{"l2":{"l3":{"l4":{"l5":{"a":1,"b":3,"n":{}}},"c":4}},"m":[]}}"#
        #expect(
            read(merge(base, value, stored))
                == read(#"{"l1":{"l2":{"l3":{"l4":{"l5":{"a":2,"b":3,"n":{}}},"c":4}},"m":[]}}"#))
    }

    @Test func arraysOfObjectsAreTakenWhole() {
        let merged = merge(
            #"{"l":[{"a":1},{"b":1}],"k":1}"#, #"{"l":[{"a":2},{"b":1}],"k":1}"#, #"{"l":[{"a":1}],"k":5}"#)
        #expect(read(merged) == read(#"{"k":5,"l":[{"a":2},{"b":1}]}"#))
        let kept = merge(#"{"l":[{"a":1}],"k":1}"#, #"{"l":[ { "a" : 1.0 } ],"k":2}"#, #"{"l":[{"a":9}],"k":1}"#)
        #expect(read(kept) == read(#"{"k":2,"l":[{"a":9}]}"#))
    }

    @Test func emptyObjectsMerge() {
        #expect(read(merge("{}", #"{"a":1}"#, "{ }")) == read(#"{"a":1}"#))
        #expect(read(merge(#"{"a":1}"#, "{}", #"{"a":1,"b":2}"#)) == read(#"{"b":2}"#))
        #expect(merge("{}", "{}", "{ }").map { String(decoding: $0, as: UTF8.self) } == "{ }")
        #expect(read(merge(#"{"o":{}}"#, #"{"o":{"x":1}}"#, #"{"o":{"y":2}}"#)) == read(#"{"o":{"x":1,"y":2}}"#))
    }

    @Test func topLevelNonObjectsAreTakenWhole() {
        #expect(merge("[1]", "[2]", "[3]").map { String(decoding: $0, as: UTF8.self) } == "[2]")
        #expect(merge("1", "1", #" "x" "#).map { String(decoding: $0, as: UTF8.self) } == #""x""#)
        #expect(merge("null", "true", #"{"a":1}"#).map { String(decoding: $0, as: UTF8.self) } == "true")
        #expect(merge(#"{"a":1}"#, "[1]", #"{"a":2}"#).map { String(decoding: $0, as: UTF8.self) } == "[1]")
        #expect(merge(#"{"a":1}"#, #"{"a":2}"#, "[1]").map { String(decoding: $0, as: UTF8.self) } == #"{"a":2}"#)
    }

    @Test func enumCaseObjectsAreTakenWholeWithReplacingCases() {
        let base = #"{"state":{"idle":{}},"n":1}"#
        let value = #"{"state":{"running":{"pid":4}},"n":1}"#
        let stored = #"{"state":{"idle":{},"since":5},"n":2}"#
        #expect(
            read(merge(base, value, stored, replacingCases: true)) == read(#"{"n":2,"state":{"running":{"pid":4}}}"#))
        #expect(read(merge(base, value, stored)) == read(#"{"n":2,"state":{"running":{"pid":4},"since":5}}"#))
    }

    @Test func fillingAddsTheValuesMembersOnceUnderEitherSpelling() {
        let filled = FieldMerge.filling(Data(#"{"caf\u00e9":1,"b":2}"#.utf8), from: Data(#"{"café":9,"c":3}"#.utf8))
        #expect(read(filled) == read(#"{"b":2,"c":3,"café":1}"#))
        #expect(FieldMerge.filling(Data(#"{"a":1}"#.utf8), from: Data(#"{"a":2}"#.utf8)) == nil)
    }

    // MARK: Size and depth.

    @Test func deepInputsMergeLikeTheDecodedMerge() {
        let depth = 400
        func nested(_ leaf: String, extra: String = "") -> String {
            String(repeating: #"{"o":"#, count: depth) + leaf + String(repeating: "}", count: depth) + extra
        }
        let base = "{\"a\":1,\"d\":" + nested(#"{"x":1,"y":1}"#) + "}"
        let value = "{\"a\":1,\"d\":" + nested(#"{"x":2,"y":1}"#) + "}"
        let stored = "{\"a\":3,\"d\":" + nested(#"{"x":1,"y":5}"#) + "}"
        let merged = merge(base, value, stored)
        #expect(merged != nil)
        #expect(read(merged) == read(DecodedValueMerge.merge(base: base, value: value, stored: stored)))
    }

    @Test func largeInputsMergeLikeTheDecodedMerge() {
        let count = 5_000
        func object(_ change: (Int) -> String) -> String {
            "{" + (0..<count).map { "\"k\($0)\":\(change($0))" }.joined(separator: ",") + "}"
        }
        let base = object { #"{"v":\#($0),"s":"\#(String(repeating: "x", count: 8))"}"# }
        let value = object { $0 % 3 == 0 ? #"{"v":-\#($0),"s":"xxxxxxxx"}"# : #"{"v":\#($0),"s":"xxxxxxxx"}"# }
        let stored = object { $0 % 5 == 0 ? #"{"v":\#($0),"s":"stored"}"# : #"{"v":\#($0),"s":"xxxxxxxx"}"# }
        let merged = merge(base, value, stored)
        #expect(read(merged) == read(DecodedValueMerge.merge(base: base, value: value, stored: stored)))
    }

    // MARK: Against the merge through decoded values.

    /// Random objects, with random spacing and key spellings, changed by a writer and by another program: the merge
    /// reads, through `JSONDecoder`, as the merge it replaced did.
    @Test func randomChangesMergeLikeTheDecodedMerge() {
        var random = SplitMix64(seed: 0x5EED_F1E1_D3E6)
        for round in 0..<400 {
            let base = RandomJSON.object(depth: 0, using: &random)
            let value = RandomJSON.changed(base, depth: 0, using: &random)
            let stored = RandomJSON.changed(base, depth: 0, using: &random)
            let texts = [base, value, stored].map { RandomJSON.text($0, using: &random) }
            let replacing = round % 4 == 0
            let merged = merge(texts[0], texts[1], texts[2], replacingCases: replacing)
            let old = DecodedValueMerge.merge(
                base: texts[0], value: texts[1], stored: texts[2], replacingCases: replacing)
            #expect(merged != nil, "\(texts)")
            #expect(read(merged) == read(old), "\(texts)")
            if let merged {
                let filled = FieldMerge.filling(merged, from: Data(texts[1].utf8))
                let oldFilled = old.flatMap { DecodedValueMerge.filling($0, from: Data(texts[1].utf8)) }
                #expect(read(filled) == read(oldFilled), "\(texts)")
            }
        }
    }
}

/// A JSON value as `JSONDecoder` reads it, to compare: numbers as `Double`s, or as `Decimal`s' digits when a `Double`
/// does not read them; object members the first of a name, as the decoder takes them.
enum Reading: Decodable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case digits(String)
    case string(String)
    case array([Reading])
    case object([String: Reading])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Decimal.self), value.significantDigitsBeyondDouble {
            self = .digits("\(value)")
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .number(Double(value))
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([Reading].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: Reading].self))
        }
    }
}

extension Decimal {
    /// Whether a `Double` would round these digits (more than 15 significant ones).
    fileprivate var significantDigitsBeyondDouble: Bool {
        "\(self)".filter(\.isNumber).drop { $0 == "0" }.reversed().drop { $0 == "0" }.count > 15
    }
}

/// A generator of pseudo-random numbers with a seed, so that a failure repeats.
/// Random JSON trees, their changes, and their texts with random spacing and key spellings (no duplicate keys).
enum RandomJSON {
    indirect enum Tree {
        case scalar(String)
        case array([Tree])
        case object([(String, Tree)])
    }

    static let names = ["a", "b", "café", "ключ", "😀", "q\"t", "s\\l", "e", "tab\t"]

    static func scalar(using random: inout SplitMix64) -> Tree {
        let scalars = [
            "0", "1", "-1", "2.5", "1e3", "null", "true", "false", #""x""#, #""caf\u00e9""#, #""""#, "-0",
            "9007199254740993", #""\ud83d\ude00""#, "[]", "[1,{\"z\":1}]",
        ]
        return .scalar(scalars.randomElement(using: &random) ?? "0")
    }

    static func object(depth: Int, using random: inout SplitMix64) -> Tree {
        let count = Int.random(in: 0...4, using: &random)
        let chosen = names.shuffled(using: &random).prefix(count)
        return .object(chosen.map { ($0, member(depth: depth + 1, using: &random)) })
    }

    static func member(depth: Int, using random: inout SplitMix64) -> Tree {
        depth < 4 && Bool.random(using: &random) ? object(depth: depth, using: &random) : scalar(using: &random)
    }

    /// `tree` with some members changed, removed or added, at any depth.
    static func changed(_ tree: Tree, depth: Int, using random: inout SplitMix64) -> Tree {
        guard case .object(let members) = tree else {
            return Int.random(in: 0..<3, using: &random) == 0 ? member(depth: depth, using: &random) : tree
        }
        var result: [(String, Tree)] = []
        for (name, value) in members {
            switch Int.random(in: 0..<8, using: &random) {
            case 0: continue
            case 1: result.append((name, member(depth: depth + 1, using: &random)))
            default: result.append((name, changed(value, depth: depth + 1, using: &random)))
            }
        }
        if Int.random(in: 0..<4, using: &random) == 0,
            let name = names.filter({ name in !result.contains { $0.0 == name } }).randomElement(using: &random)
        {
            result.append((name, member(depth: depth + 1, using: &random)))
        }
        return .object(result.shuffled(using: &random))
    }

    static func text(_ tree: Tree, using random: inout SplitMix64) -> String {
        func space() -> String { ["", "", " ", "\n  ", "\t"].randomElement(using: &random) ?? "" }
        switch tree {
        case .scalar(let text): return text
        case .array(let items): return "[" + items.map { text($0, using: &random) }.joined(separator: ",") + "]"
        case .object(let members):
            let parts = members.map { name, value in
                space() + key(name, using: &random) + space() + ":" + space() + text(value, using: &random) + space()
            }
            return space() + "{" + parts.joined(separator: ",") + space() + "}" + space()
        }
    }

    /// `name` as a JSON string, its non-ASCII characters sometimes as `\u` escapes.
    static func key(_ name: String, using random: inout SplitMix64) -> String {
        let escaping = Bool.random(using: &random)
        var text = "\""
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\t": text += "\\t"
            case _ where scalar.value > 0x7F && escaping:
                for unit in String(scalar).utf16 { text += String(format: "\\u%04x", unit) }
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }
}

/// The merge as it was before it kept bytes (`FieldMerge` at e4d3cbe^), through decoded values and the encoder, to
/// compare what the decoder reads of each.
enum DecodedValueMerge {
    static func merge(base: String, value: String, stored: String, replacingCases: Bool = false) -> Data? {
        merge(base: Data(base.utf8), value: Data(value.utf8), stored: Data(stored.utf8), replacingCases: replacingCases)
    }

    static func merge(base: Data, value: Data, stored: Data, replacingCases: Bool = false) -> Data? {
        guard let base = try? JSONCoders.decoder.decode(DecodedJSONValue.self, from: base),
            let value = try? JSONCoders.decoder.decode(DecodedJSONValue.self, from: value),
            let stored = try? JSONCoders.decoder.decode(DecodedJSONValue.self, from: stored)
        else { return nil }
        guard let merged = merge(base: base, value: value, stored: stored, replacingCases: replacingCases) else {
            return nil
        }
        return try? JSONCoders.encoder.encode(merged)
    }

    static func filling(_ merged: Data, from value: Data) -> Data? {
        guard case .object(var members)? = try? JSONCoders.decoder.decode(DecodedJSONValue.self, from: merged),
            case .object(let valueMembers)? = try? JSONCoders.decoder.decode(DecodedJSONValue.self, from: value)
        else { return nil }
        let missing = valueMembers.filter { members[$0.key] == nil }
        guard !missing.isEmpty else { return nil }
        members.merge(missing) { stored, _ in stored }
        return try? JSONCoders.encoder.encode(DecodedJSONValue.object(members))
    }

    private static func merge(
        base: DecodedJSONValue?, value: DecodedJSONValue?, stored: DecodedJSONValue?, replacingCases: Bool
    ) -> DecodedJSONValue? {
        if value == base { return stored }
        guard case .object(let baseMembers)? = base, case .object(let valueMembers)? = value,
            case .object(var members)? = stored,
            !replacingCases || (!disjoint(valueMembers, baseMembers) && !disjoint(valueMembers, members))
        else { return value }
        for name in Set(baseMembers.keys).union(valueMembers.keys) {
            members[name] = merge(
                base: baseMembers[name], value: valueMembers[name], stored: members[name],
                replacingCases: replacingCases)
        }
        return .object(members)
    }

    private static func disjoint(_ one: [String: DecodedJSONValue], _ other: [String: DecodedJSONValue]) -> Bool {
        !one.isEmpty && !other.isEmpty && !one.keys.contains { other[$0] != nil }
    }
}

enum DecodedJSONValue: Codable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case number(Double)
    case decimal(Decimal)
    case string(String)
    case array([DecodedJSONValue])
    case object([String: DecodedJSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let exact = try? container.decode(Decimal.self) {
            if let value = try? container.decode(Int64.self), Decimal(value) == exact {
                self = .integer(value)
            } else if let value = try? container.decode(UInt64.self), Decimal(value) == exact {
                self = .unsigned(value)
            } else if let value = try? container.decode(Double.self), Decimal(string: "\(value)") == exact {
                self = .number(value)
            } else {
                self = .decimal(exact)
            }
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(UInt64.self) {
            self = .unsigned(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([DecodedJSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: DecodedJSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .unsigned(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .decimal(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
