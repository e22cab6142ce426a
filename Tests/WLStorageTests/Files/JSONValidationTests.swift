import Foundation
import Testing
import WLStorage

/// The streaming JSON validator: what it accepts, what it refuses and where, in one piece or in chunks.
@Suite(.capturingOutput) struct JSONValidationTests {
    // MARK: Tables

    @Test(arguments: [
        "0", "-0", "42", "-1.5e3", "1E+2", "0.25e-2", "12345678901234567890", "0e999", "-0.0e-999", "1e308",
        "4.9e-324", "1.7976931348623157e308", "true", "false", "null", #""""#, #""abc""#, "[]", "{}", " [ ] ",
        "\t\r\n{\"a\" : [1, true, false, null, \"x\", {}], \"b\": {\"c\": []}}\n",
        #""\/\b\f\n\r\t\"\\""#, #""\u00e9\u00E9\ud83d\ude00""#, "\"é€😀\u{7f}\"", "\u{feff}1", "\u{feff} {} ",
    ])
    func aJSONTextIsAccepted(text: String) {
        #expect(JSONValidator.problem(in: Array(text.utf8)) == nil)
    }

    @Test(arguments: InvalidText.all)
    func aTextThatIsNotJSONIsRefusedWithAReasonAndTheOffsetOfTheByteItIsAbout(example: InvalidText) throws {
        let problem = try #require(JSONValidator.problem(in: example.bytes))
        #expect(problem.reason.contains(example.reason), "\(problem)")
        #expect(problem.offset == example.offset, "\(problem)")
        #expect(problem.description == "\(problem.reason) at byte \(problem.offset)")
    }

    // MARK: Numbers and the range of a Double

    @Test(arguments: ["1e400", "-1e400", "1e309", "1.7976931348623159e308", "123e999999999999999999999"])
    func aNumberBeyondTheRangeOfADoubleIsRefused(text: String) throws {
        let problem = try #require(JSONValidator.problem(in: Array(text.utf8)))
        #expect(problem.reason == "the number \(text) is out of the range of a Double (too large)")
        #expect(problem.offset == 0)
    }

    @Test(arguments: ["1e-400", "-1e-400", "1E-324", "2.4703282292062327e-324", "0.1e-999999999999999999999"])
    func aNumberThatIsNotZeroButWouldReadAsZeroIsRefused(text: String) throws {
        let problem = try #require(JSONValidator.problem(in: Array(text.utf8)))
        #expect(problem.reason == "the number \(text) is out of the range of a Double (it would read as 0)")
        #expect(problem.offset == 0)
    }

    @Test func theOffsetOfANumberOutOfRangeIsWhereTheNumberStarts() throws {
        let problem = try #require(JSONValidator.problem(in: Array(#"{"a": [1, 1e-400]}"#.utf8)))
        #expect(problem.offset == 10)
        #expect(problem.reason.hasPrefix("the number 1e-400 "))
    }

    @Test func aLongNumberIsQuotedByItsStartOnly() throws {
        let text = "1" + String(repeating: "0", count: 400)
        let problem = try #require(JSONValidator.problem(in: Array(text.utf8)))
        #expect(problem.reason == "the number \(text.prefix(40))… is out of the range of a Double (too large)")
    }

    /// Numbers at the edges of the range of a `Double`, down to the exact values where rounding turns to infinity
    /// and to zero, and those values with a non-zero digit past the digits the validator keeps: the validator says
    /// yes exactly where `JSONDecoder` decodes a `Double`.
    @Test(arguments: NumberAtTheEdge.all)
    func theVerdictOnANumberIsThatOfJSONDecoder(number: NumberAtTheEdge) {
        let decodes = (try? JSONDecoder().decode(Double.self, from: Data(number.text.utf8))) != nil
        #expect(decodes == number.decodes, "the table is wrong about \(number.testDescription)")
        #expect((JSONValidator.problem(in: Array(number.text.utf8)) == nil) == decodes)
    }

    // MARK: Nesting

    @Test func arraysAndObjectsNestAsDeepAsJSONDecoderReadsThemAndNoDeeper() throws {
        func nested(_ depth: Int) -> [UInt8] {
            Array((String(repeating: #"{"a":["#, count: depth / 2) + String(repeating: "[", count: depth % 2)).utf8)
                + [UInt8(ascii: "1")]
                + Array((String(repeating: "]", count: depth % 2) + String(repeating: "]}", count: depth / 2)).utf8)
        }
        #expect(JSONValidator.problem(in: nested(512)) == nil)
        let problem = try #require(JSONValidator.problem(in: nested(513)))
        #expect(problem.reason == "arrays and objects nest deeper than 512")
        #expect(problem.offset == 256 * 6)

        let deepArray = Array(String(repeating: "[", count: 100_000).utf8)
        #expect(JSONValidator.problem(in: deepArray)?.offset == 512)
        #expect(JSONValidator.problem(in: Array("[[[1]]]".utf8), maximumDepth: 2)?.offset == 2)
        #expect(JSONValidator.problem(in: Array("[[1],[2]]".utf8), maximumDepth: 2) == nil)
    }

    // MARK: Chunks

    /// Every text is fed in two chunks split at each of its bytes, and one byte at a time: the verdict, and the
    /// offset of a problem, are those of the text fed whole.
    @Test(arguments: ChunkedText.all)
    func aChunkBoundaryAnywhereChangesNothing(example: ChunkedText) {
        let bytes = example.bytes
        let whole = JSONValidator.problem(in: bytes)
        #expect(whole?.offset == example.offset)
        for split in 0...bytes.count {
            var validator = JSONValidator()
            validator.feed(bytes[..<split])
            validator.feed(bytes[split...])
            #expect(validator.finish() == whole, "split at \(split)")
        }
        var validator = JSONValidator()
        for byte in bytes { validator.feed(CollectionOfOne(byte)) }
        #expect(validator.finish() == whole)
        #expect(validator.byteCount == (whole == nil ? bytes.count : validator.byteCount))
    }

    @Test func aProblemStaysAndTheBytesAfterItAreNotRead() throws {
        var validator = JSONValidator()
        let fed = validator.feed(Array("[1,,".utf8))
        let first = try #require(fed)
        #expect(first.offset == 3)
        #expect(validator.feed(Array("2]".utf8)) == first)
        #expect(validator.finish() == first)
        #expect(validator.problem == first)
    }

    @Test func aLargeTextIsCheckedThroughASmallBuffer() {
        // About 4 MB, fed 4 KiB at a time: the validator keeps no text, only its state.
        let element = Array(#"{"id":12345,"name":"a name","tags":["x","y"],"ratio":0.125,"ok":true},"#.utf8)
        let count = 60_000
        var validator = JSONValidator()
        var chunk: [UInt8] = [UInt8(ascii: "[")]
        for index in 0..<count {
            chunk += index == count - 1 ? element.dropLast() : element[...]
            if chunk.count >= 4096 {
                #expect(validator.feed(chunk) == nil)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        chunk.append(UInt8(ascii: "]"))
        validator.feed(chunk)
        #expect(validator.finish() == nil)
        #expect(validator.byteCount == 2 + count * element.count - 1)
    }
}

// MARK: - Tables

extension JSONValidationTests {
    /// A text that is not JSON, the words its reason contains, and the offset of the byte it is about.
    struct InvalidText: Sendable, CustomTestStringConvertible {
        var bytes: [UInt8]
        var reason: String
        var offset: Int

        var testDescription: String { String(decoding: bytes, as: UTF8.self).debugDescription }

        init(_ text: String, _ reason: String, at offset: Int) {
            self.init(bytes: Array(text.utf8), reason, at: offset)
        }

        init(bytes: [UInt8], _ reason: String, at offset: Int) {
            self.bytes = bytes
            self.reason = reason
            self.offset = offset
        }

        static let all = [
            InvalidText("", "no JSON value in the text", at: 0),
            InvalidText(" \n ", "no JSON value in the text", at: 3),
            InvalidText("\u{feff}", "no JSON value in the text", at: 3),
            InvalidText("{nope", "expected a string key or '}', found 'n'", at: 1),
            InvalidText("tru", "unexpected end of the text in 'true'", at: 3),
            InvalidText("trUe", "expected 'true', found 'U'", at: 2),
            InvalidText("1 2", "unexpected text after the JSON value: '2'", at: 2),
            InvalidText("{} x", "unexpected text after the JSON value: 'x'", at: 3),
            InvalidText(#"{"a":}"#, "expected a value, found '}'", at: 5),
            InvalidText(#"{"a" 1}"#, "expected ':' after an object key, found '1'", at: 5),
            InvalidText(#"{"a":1,}"#, "expected a string key, found '}'", at: 7),
            InvalidText(#"{"a":1 "b":2}"#, "expected ',' or '}', found '\"'", at: 7),
            InvalidText("[1,]", "expected a value, found ']'", at: 3),
            InvalidText("[1 2]", "expected ',' or ']', found '2'", at: 3),
            InvalidText("[1", "unexpected end of the text in an array", at: 2),
            InvalidText(#"{"a":[]"#, "unexpected end of the text in an object", at: 7),
            InvalidText("]", "expected a value, found ']'", at: 0),
            InvalidText("'single'", "expected a value, found '''", at: 0),
            InvalidText("NaN", "expected a value, found 'N'", at: 0),
            InvalidText("-Infinity", "a number needs a digit after '-'", at: 1),
            InvalidText("01", "a number cannot start with 0 followed by another digit", at: 1),
            InvalidText("-", "unexpected end of the text in a number", at: 1),
            InvalidText("1.", "unexpected end of the text in a number", at: 2),
            InvalidText("1.e3", "a number needs a digit after '.'", at: 2),
            InvalidText("1e+", "unexpected end of the text in a number", at: 3),
            InvalidText("[1e]", "a number needs a digit in its exponent", at: 3),
            InvalidText("+1", "expected a value, found '+'", at: 0),
            InvalidText(".5", "expected a value, found '.'", at: 0),
            InvalidText(#""abc"#, "unexpected end of the text in a string", at: 4),
            InvalidText("\"a\u{1}b\"", "a control character (byte 0x01) in a string", at: 2),
            InvalidText("\"a\tb\"", "a control character (byte 0x09) in a string", at: 2),
            InvalidText(#""\q""#, #"an invalid escape in a string: '\' followed by 'q'"#, at: 1),
            InvalidText(#""\u12g4""#, "a \\u escape needs 4 hex digits, found 'g'", at: 5),
            InvalidText(#"["\ud800"]"#, "a \\u escape of a high surrogate is not followed by one of a low", at: 2),
            InvalidText(#""\ud800\n""#, "a \\u escape of a high surrogate is not followed by one of a low", at: 1),
            InvalidText(#""x\ud800\u0041""#, "a \\u escape of a high surrogate is not followed by one of a low", at: 2),
            InvalidText(#""\udc00""#, "a \\u escape of a low surrogate without a high surrogate before it", at: 1),
            InvalidText(bytes: [0xFF, 0xFE, 0x31, 0x00], "the text is not UTF-8 (byte 0xff)", at: 0),
            InvalidText(bytes: [0x22, 0xFF, 0x22], "the text is not UTF-8 (byte 0xff in a string)", at: 1),
            InvalidText(bytes: [0x22, 0xC0, 0x80, 0x22], "the text is not UTF-8 (byte 0xc0 in a string)", at: 1),
            InvalidText(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], "the text is not UTF-8 (byte 0xa0 in a string)", at: 2),
            InvalidText(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "not UTF-8 (byte 0x90 in a string)", at: 2),
            InvalidText(bytes: [0x22, 0xE2, 0x82, 0x22], "the text is not UTF-8 (byte 0x22 in a string)", at: 3),
            InvalidText(bytes: [0x22, 0x80, 0x22], "the text is not UTF-8 (byte 0x80 in a string)", at: 1),
            InvalidText(bytes: [0xC3, 0xA9], "expected a value, found byte 0xc3", at: 0),
            InvalidText(bytes: [0xEF, 0xBB, 0x31], "the text is not UTF-8 (byte 0x31)", at: 2),
            InvalidText(bytes: [0xEF, 0xBB], "unexpected end of the text in its byte order mark", at: 2),
            InvalidText(bytes: [0x31, 0x00], "unexpected text after the JSON value: byte 0x00", at: 1),
        ]
    }

    /// A number, and whether `JSONDecoder` decodes it as a `Double` on this platform.
    struct NumberAtTheEdge: Sendable, CustomTestStringConvertible {
        var text: String
        var decodes: Bool

        var testDescription: String { text.count > 40 ? "\(text.prefix(40))… (\(text.count) bytes)" : text }

        /// 2^1024 - 2^970, halfway between the largest `Double` and 2^1024: it and anything above round to infinity.
        static let overflowTie = [
            "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587",
            "207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711",
            "531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093",
            "042880177904174497792",
        ].joined()

        /// The significant digits of 2^-1075, half the smallest `Double`: it and anything below round to zero.
        static let underflowTie = [
            "247032822920623272088284396434110686182529901307162382212792841250337753635104375932649918180817",
            "996189898282347722858865463328355177969898199387398005390939063150356595155702263922908583924491",
            "051844359318028499365361525003193704576782492193656236698636584807570015857692699037063119282795",
            "585513329278343384093519780155312465972635795746227664652728272200563740064854999770965994704540",
            "208281662262378573934507363390079677619305775067401763246736009689513405355374585166611342237666",
            "786041621596804619144672918403005300575308490487653917113865916462395249126236538818796362393732",
            "804238910186723484976682350898633885879256283027559956575244555072551893136908362547791869486679",
            "94968324049705821028513185451396213837722826145437693412532098591327667236328125",
        ].joined()

        static let zeros = String(repeating: "0", count: 300)

        static let all = [
            NumberAtTheEdge(text: "1e308", decodes: true),
            NumberAtTheEdge(text: "1e309", decodes: false),
            NumberAtTheEdge(text: "1.7976931348623157e308", decodes: true),
            NumberAtTheEdge(text: "1.797693134862315807e308", decodes: true),
            NumberAtTheEdge(text: "1.797693134862315808e308", decodes: false),
            NumberAtTheEdge(text: "-1.797693134862315808e308", decodes: false),
            NumberAtTheEdge(text: overflowTie, decodes: false),
            NumberAtTheEdge(text: String(overflowTie.dropLast()) + "1", decodes: true),
            NumberAtTheEdge(text: String(overflowTie.dropLast()) + "1." + zeros + "1", decodes: true),
            NumberAtTheEdge(text: "0.\(overflowTie)\(zeros)\(zeros)1e309", decodes: false),
            NumberAtTheEdge(text: "1e-323", decodes: true),
            NumberAtTheEdge(text: "4.9e-324", decodes: true),
            NumberAtTheEdge(text: "3e-324", decodes: true),
            NumberAtTheEdge(text: "2.4703282292062328e-324", decodes: true),
            NumberAtTheEdge(text: "2.4703282292062327e-324", decodes: false),
            NumberAtTheEdge(text: "1e-324", decodes: false),
            NumberAtTheEdge(text: "0.\(underflowTie)e-323", decodes: false),
            NumberAtTheEdge(text: "-0.\(underflowTie)e-323", decodes: false),
            NumberAtTheEdge(text: "0.\(underflowTie)\(zeros)1e-323", decodes: true),
            NumberAtTheEdge(text: "0.\(underflowTie)\(zeros)\(zeros)1e-323", decodes: true),
            NumberAtTheEdge(text: "0.0000\(underflowTie)1e-319", decodes: true),
            NumberAtTheEdge(text: "0.0000\(underflowTie)e-319", decodes: false),
            NumberAtTheEdge(text: "\(underflowTie)1e-1075", decodes: true),
            NumberAtTheEdge(text: "12345678901234567890", decodes: true),
            NumberAtTheEdge(text: "0e99999999999999999999", decodes: true),
            NumberAtTheEdge(text: "0.\(zeros)e99999", decodes: true),
        ]
    }

    /// A text to feed in chunks, and the offset of its problem (`nil` for JSON).
    struct ChunkedText: Sendable, CustomTestStringConvertible {
        var bytes: [UInt8]
        var offset: Int?
        var testDescription: String { String(decoding: bytes, as: UTF8.self).debugDescription }

        static let all = [
            // Boundaries inside string escapes: \n, \u00e9 and a surrogate pair.
            ChunkedText(bytes: Array(#"{"a\n\u00e9":"\ud83d\ude00\\\""}"#.utf8), offset: nil),
            ChunkedText(bytes: Array(#"["\ud83d\u0041"]"#.utf8), offset: 2),
            ChunkedText(bytes: Array(#""\x""#.utf8), offset: 1),
            // Boundaries inside numbers, and a number out of range.
            ChunkedText(bytes: Array("[-12.5e+10,0.000125,123456789012345678901234567890]".utf8), offset: nil),
            ChunkedText(bytes: Array("-12.5e+10".utf8), offset: nil),
            ChunkedText(bytes: Array("[1,1e-400]".utf8), offset: 3),
            ChunkedText(bytes: Array("1e400".utf8), offset: 0),
            ChunkedText(bytes: Array("[1.]".utf8), offset: 3),
            // Boundaries inside UTF-8 sequences of 2, 3 and 4 bytes, valid and not.
            ChunkedText(bytes: Array("\u{feff}[\"é€😀\", \"\u{10FFFF}\"]".utf8), offset: nil),
            ChunkedText(bytes: [0x22, 0xE2, 0x82, 0x41, 0x22], offset: 3),
            ChunkedText(bytes: [0x22, 0xF0, 0x9F, 0x98, 0x22], offset: 4),
            // Literals.
            ChunkedText(bytes: Array("[true,false,null]".utf8), offset: nil),
            ChunkedText(bytes: Array("[nul]".utf8), offset: 4),
        ]
    }
}
