import Foundation
import Testing
import WLStorageJSON

@testable import WLStorage

@Suite(.capturingOutput)
struct JSONFillTests {
    /// The bytes `stored` decodes from as `T` once filled in from `defaults`, or `nil`.
    private func fill<T: Decodable>(_ stored: String, _ defaults: String, as type: T.Type) -> String? {
        let data = Data(stored.utf8)
        guard case .failure(let error) = Result(catching: { try JSONDecoder().decode(T.self, from: data) }) else {
            return nil
        }
        return JSONFill.filled(data, failing: error, from: Data(defaults.utf8), as: type).map {
            String(decoding: $0.bytes, as: UTF8.self)
        }
    }

    private struct Inner: Decodable {
        var x: String
        var y: Int
    }

    private struct Element: Decodable {
        var k: Int
    }

    private struct Nested: Decodable {
        var a: Double
        var b: [Int]
        var o: Inner
        var arr: [Element]
        var optional: Int?
    }

    private struct Pair: Decodable {
        var a: Int
        var b: Int
    }

    @Test func onlyTheMembersTheTypeCannotDoWithoutAreAddedAndTheStoredOnesStayByteForByte() {
        #expect(
            fill(
                #"{ "a" : 1.50, "o": {"x": "\u0041"}, "arr": [{"k":1}] }"#,
                #"{"a":2,"b":[3],"o":{"x":"B","y":7},"optional":5}"#, as: Nested.self)
                == #"{ "a" : 1.50, "o": {"x": "\u0041","y":7}, "arr": [{"k":1}],"b":[3] }"#)
    }

    @Test func keysAreComparedAsTheStringsTheyStandFor() {
        #expect(fill(#"{"\u0061":1}"#, #"{"a":2,"b":3}"#, as: Pair.self) == #"{"\u0061":1,"b":3}"#)
    }

    @Test func anotherCaseOfAnEnumIsKeptAsItIs() {
        enum Shape: Codable {
            case circle(radius: Int)
            case square(side: Int)
        }
        struct Drawing: Codable {
            var shape: Shape
            var visits: Int
        }
        let defaults = #"{"shape":{"circle":{"radius":1}},"visits":3}"#
        #expect(
            fill(#"{"shape":{"square":{"side":2}}}"#, defaults, as: Drawing.self)
                == #"{"shape":{"square":{"side":2}},"visits":3}"#)
    }

    @Test func nothingIsFilledWhenNothingIsMissingOrWhatIsMissingHasNoCounterpart() {
        #expect(fill(#"{"a":1,"b":2}"#, #"{"a":2,"b":3}"#, as: Pair.self) == nil)
        #expect(fill("[1]", #"{"a":2,"b":3}"#, as: Pair.self) == nil)
        #expect(fill(#"{"a":1"#, #"{"b":2}"#, as: Pair.self) == nil)
        #expect(fill(#"{"a":1}"#, #"{"a":2}"#, as: Pair.self) == nil)  // the default lacks b too
        // A member missing inside an array's element has no counterpart in the default.
        #expect(
            fill(#"{"a":1,"b":[],"o":{"x":"","y":1},"arr":[{}]}"#, #"{"arr":[{"k":1}]}"#, as: Nested.self) == nil)
    }

    @Test func coverageTellsWhetherAValueKeepsAllOrAnyOfTheStoredMembers() {
        func coverage(_ stored: String, _ encoded: String) -> (Bool, Bool) {
            let result = JSONFill.coverage(of: Data(stored.utf8), in: Data(encoded.utf8))
            return (result.all, result.any)
        }
        #expect(coverage(#"{"a":1,"o":{"x":1}}"#, #"{"a":2,"b":3,"o":{"x":5,"y":1}}"#) == (true, true))
        #expect(coverage(#"{"a":1,"o":{"x":1,"z":2}}"#, #"{"a":2,"o":{"x":5}}"#) == (false, true))
        #expect(coverage(#"{"c":1}"#, #"{"a":2}"#) == (false, false))
        #expect(coverage("[1]", #"{"a":2}"#) == (false, false))
    }

    @Test func stringsWithBracesAndEscapedQuotesAreSkippedWhole() {
        struct Texts: Decodable {
            var s: String
            var t: [String]
            var u: Bool
        }
        #expect(
            fill(#"{"s":"}\"{[","t":["]","\\"]}"#, #"{"u":true}"#, as: Texts.self)
                == #"{"s":"}\"{[","t":["]","\\"],"u":true}"#)
    }

    @Test func aMemberMissingInADuplicatedObjectIsAddedToTheFirstTheDecoderReads() {
        struct Outer: Decodable {
            var o: Inner
        }
        #expect(
            fill(#"{"o":{"x":"a"},"o":{"x":"b"}}"#, #"{"o":{"x":"B","y":7}}"#, as: Outer.self)
                == #"{"o":{"x":"a","y":7},"o":{"x":"b"}}"#)
    }
}
