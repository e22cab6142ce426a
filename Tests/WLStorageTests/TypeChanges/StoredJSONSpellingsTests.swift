// Three versions of a type over one key whose bytes another program wrote in spellings `JSONDecoder` reads: repeated
// names, escaped names, whitespace, trailing commas, a byte order mark, UTF-16 and UTF-32, numbers spelled `1.0`, `1e0`,
// `-0`. What each version reads must be what the decoder reads of the bytes (after the declared rename); reading never
// writes; a change of one field leaves every other field, known or not, reading the same in every version.
import Foundation
import Testing
import WLStorageFleet
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageJSON

private struct Inner: Codable, Equatable, Sendable {
    var x = 0
    var y = 0
}

/// The first version: `a` and `b`.
private struct V1: Codable, Equatable, Sendable {
    var a = 0
    var b = "b0"
    var note: String?
}

/// The second: `b` renamed `bee`, and `c` added.
private struct V2: Codable, Equatable, Sendable {
    var a = 0
    var bee = "b0"
    var c = 0
    var note: String?
}

/// The third: `d` added, a nested object whose `y` was added after its `x`.
private struct V3: Codable, Equatable, Sendable {
    var a = 0
    var bee = "b0"
    var c = 0
    var d = Inner()
    var note: String?
}

private let renamed: [WLStorageMigration<V2>] = [.renamed(from: "b", to: "bee")]
private let renamed3: [WLStorageMigration<V3>] = [.renamed(from: "b", to: "bee")]

/// Every member any version writes, and members none knows, as the decoder reads them.
private struct Probe: Decodable {
    struct InnerProbe: Decodable {
        var x: Int?
        var y: Int?
    }
    var a: Int?
    var b: String?
    var bee: String?
    var c: Int?
    var d: InnerProbe?
    var note: String?

    /// What each version reads of bytes the decoder reads as this: the old name wins, the rest from the defaults.
    var readings: Readings {
        let bee = b ?? bee ?? "b0"
        return Readings(
            v1: V1(a: a ?? 0, b: b ?? "b0", note: note),
            v2: V2(a: a ?? 0, bee: bee, c: c ?? 0, note: note),
            v3: V3(a: a ?? 0, bee: bee, c: c ?? 0, d: Inner(x: d?.x ?? 0, y: d?.y ?? 0), note: note))
    }
}

private struct Readings: Equatable {
    var v1: V1
    var v2: V2
    var v3: V3
}

/// A change of one field by one version, and what every version reads after it.
private enum FieldChange: CaseIterable {
    case a, b, c, x, y, note

    /// The versions that know the field.
    var versions: [Int] {
        switch self {
        case .a, .b, .note: [1, 2, 3]
        case .c: [2, 3]
        case .x, .y: [3]
        }
    }

    func apply(_ value: Int, to readings: inout Readings) {
        switch self {
        case .a: (readings.v1.a, readings.v2.a, readings.v3.a) = (value, value, value)
        case .b: (readings.v1.b, readings.v2.bee, readings.v3.bee) = ("b\(value)", "b\(value)", "b\(value)")
        case .c: (readings.v2.c, readings.v3.c) = (value, value)
        case .x: readings.v3.d.x = value
        case .y: readings.v3.d.y = value
        case .note: (readings.v1.note, readings.v2.note, readings.v3.note) = ("n\(value)", "n\(value)", "n\(value)")
        }
    }
}

/// A way of spelling JSON that `JSONDecoder` reads and the package's encoder never writes.
enum Spelling: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case plain, whitespace, escapes, repeatedNames, trailingCommas, numbers, byteOrderMark, utf16, utf32, all

    var testDescription: String { rawValue }
}

/// A JSON object as another program may spell it: members in any order, each name and value spelled as `JSONDecoder`
/// reads it, a repeated name after the first (which the decoder reads), whitespace, trailing commas, any encoding.
private struct Speller {
    var random: SplitMix64
    let spelling: Spelling

    func uses(_ one: Spelling) -> Bool { spelling == one || spelling == .all }

    mutating func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }
    mutating func pick<T>(_ options: [T]) -> T { options[Int(random.next() % UInt64(options.count))] }

    mutating func space() -> String { uses(.whitespace) && chance(30) ? pick([" ", "\n", "\t", "\r\n  ", "  "]) : "" }

    mutating func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "/" where uses(.escapes) && chance(50): out += "\\/"
            default:
                if scalar.value < 0x20 || (uses(.escapes) && chance(25)) {
                    for unit in String(scalar).utf16 { out += String(format: "\\u%04x", unit) }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    mutating func number(_ n: Int) -> String {
        guard uses(.numbers) else { return "\(n)" }
        var options = ["\(n)", "\(n).0", "\(n)e0", "\(n)E+0", "\(n * 10)e-1", "\(n).000"]
        if n == 0 { options += ["-0", "-0.0", "0e9", "-0E-3"] }
        return pick(options)
    }

    /// A value the decoder reads, of any type, for repeated names and members no version knows.
    mutating func junk() -> String {
        pick([
            "1", "-0", "[1,2,]", #"{"k":[{}],"k":1}"#, "123456789012345678901234567890", "1.5e300", #""s""#, "null",
            "true", #"{"q":{"r":-0.0}}"#, "[]", "{}", #""\ud83d\ude00""#,
        ])
    }

    /// `members` as an object: each value already spelled.
    mutating func object(_ members: [(String, String)]) -> String {
        var parts: [String] = []
        for (name, value) in members {
            parts.append(space() + string(name) + space() + ":" + space() + value + space())
            if uses(.repeatedNames) && chance(15) { parts.append(space() + string(name) + ":" + junk()) }
        }
        return "{" + parts.joined(separator: ",") + (uses(.trailingCommas) && chance(20) && !parts.isEmpty ? "," : "")
            + space() + "}"
    }

    /// `text` in an encoding `JSONDecoder` reads, with or without a byte order mark.
    mutating func encoded(_ text: String) -> Data {
        var options = [7]
        if uses(.byteOrderMark) { options += [0] }
        if uses(.utf16) { options += [1, 2, 3, 4] }
        if uses(.utf32) { options += [5, 6] }
        if spelling != .all { options.removeAll { $0 == 7 } }
        if options.isEmpty { options = [7] }
        return switch pick(options) {
        case 0: Data([0xEF, 0xBB, 0xBF]) + Data(text.utf8)
        case 1: text.data(using: .utf16LittleEndian)!
        case 2: text.data(using: .utf16BigEndian)!
        case 3: Data([0xFF, 0xFE]) + text.data(using: .utf16LittleEndian)!
        case 4: Data([0xFE, 0xFF]) + text.data(using: .utf16BigEndian)!
        case 5: text.data(using: .utf32LittleEndian)!
        case 6: text.data(using: .utf32BigEndian)!
        default: Data(text.utf8)
        }
    }
}

/// The logical content of a stored object: what each member is, `nil` when absent.
private struct Document {
    var a: Int?
    var b: String?
    var bee: String?
    var c: Int?
    var d: (x: Int, y: Int?, w: Int?)?
    /// `.some(nil)`: a `null`.
    var note: String??
    var z: String?

    static func random(_ speller: inout Speller, complete: Bool = false) -> Document {
        var document = Document()
        let strings = ["dark", "a/b", "é", #"x"y"#, "line\nbreak", "😀", "tab\there"]
        if complete || speller.chance(85) { document.a = Int(speller.random.next() % 5) }
        if complete || speller.chance(85) { document.b = speller.pick(strings) }
        if let b = document.b, complete || speller.chance(60) { document.bee = speller.chance(70) ? b : "old" }
        if complete || speller.chance(60) { document.c = Int(speller.random.next() % 5) }
        if complete || speller.chance(60) {
            let y: Int? = complete || speller.chance(60) ? Int(speller.random.next() % 5) : nil
            document.d = (Int(speller.random.next() % 5), y, speller.chance(50) ? 7 : nil)
        }
        if speller.chance(60) { document.note = speller.chance(50) ? .some(nil) : speller.pick(strings) }
        if speller.chance(60) { document.z = speller.junk() }
        return document
    }

    func bytes(_ speller: inout Speller) -> Data {
        var members: [(String, String)] = []
        if let a { members.append(("a", speller.number(a))) }
        if let b { members.append(("b", speller.string(b))) }
        if let bee { members.append(("bee", speller.string(bee))) }
        if let c { members.append(("c", speller.number(c))) }
        if let d {
            var inner = [("x", speller.number(d.x))]
            if let y = d.y { inner.append(("y", speller.number(y))) }
            if let w = d.w { inner.append(("w", speller.number(w))) }
            members.append(("d", speller.object(inner.shuffled(using: &speller.random))))
        }
        if let note { members.append(("note", note.map { speller.string($0) } ?? "null")) }
        if let z { members.append(("z", z)) }
        let text = speller.space() + speller.object(members.shuffled(using: &speller.random)) + speller.space()
        return speller.encoded(text)
    }
}

@Suite(.capturingOutput)
struct StoredJSONSpellingsTests {
    static let key = "fleet"

    /// What every version reads of what `store` holds now, each through a program of its own.
    private func readings(_ store: MemoryStore) -> (Readings, [WLStorageError.Code?]) {
        let s1 = WLStorage(key: Self.key, defaultValue: V1(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        let s2 = WLStorage(
            key: Self.key, defaultValue: V2(), flushInterval: nil, store: MemoryStore(replicaOf: store),
            migrations: renamed)
        let s3 = WLStorage(
            key: Self.key, defaultValue: V3(), flushInterval: nil, store: MemoryStore(replicaOf: store),
            migrations: renamed3)
        let readings = Readings(v1: s1.wrappedValue, v2: s2.wrappedValue, v3: s3.wrappedValue)
        s1.flush()
        s2.flush()
        s3.flush()
        return (readings, [s1.lastError?.code, s2.lastError?.code, s3.lastError?.code])
    }

    private func stored(_ store: MemoryStore) -> Data? { store.contents.state.withLock { $0.values[Self.key] } }

    /// The bytes of the members no version knows, `z` and `d.w`, as UTF-8 (the first of a repeated name).
    private func unknownMembers(_ data: Data?) -> [[UInt8]?] {
        guard let data, let (bytes, members, _) = JSONFill.object(data) else { return [] }
        let z = members.first { $0.key == "z" }.map { Array(bytes[$0.value.range]) }
        guard case .object(let inner, _)? = members.first(where: { $0.key == "d" })?.value else { return [z, nil] }
        return [z, inner.first { $0.key == "w" }.map { Array(bytes[$0.value.range]) }]
    }

    private func probe(_ data: Data?) -> Probe? { data.flatMap { try? JSONDecoder().decode(Probe.self, from: $0) } }

    /// A program of `version` that has read the key.
    private func program(_ version: Int, over store: MemoryStore) -> any Changer {
        switch version {
        case 1: Program<V1>(store: store, migrations: [])
        case 2: Program<V2>(store: store, migrations: renamed)
        default: Program<V3>(store: store, migrations: renamed3)
        }
    }

    /// A store holding `bytes` under the key.
    private func store(holding bytes: Data) -> MemoryStore {
        let store = MemoryStore()
        store.contents.state.withLock { $0.values[Self.key] = bytes }
        return store
    }

    // MARK: Trailing commas, which Foundation reads

    /// A member filled from the default into an object that ends in a comma goes after its last member, not after the
    /// comma (where it made `,,`, which no decoder reads, so the value was the default, and another version's).
    @Test func aMemberFilledIntoAnObjectEndingInACommaIsRead() {
        let bytes = Data(#"{"a":1,"b":"x","bee":"x","c":2,"d":{"x":3,},}"#.utf8)
        let store = store(holding: bytes)
        let (read, errors) = readings(store)
        #expect(read.v3 == V3(a: 1, bee: "x", c: 2, d: Inner(x: 3, y: 0)))
        #expect(errors == [nil, nil, nil])
        #expect(stored(store) == bytes)
    }

    /// The new name of a renamed field, read from an object that ends in a comma: the old name's value, not bytes that
    /// are no JSON (which made the value one to keep aside as corrupt, and replaced by the next write).
    @Test func aRenamedFieldOfAnObjectEndingInACommaIsRead() {
        let bytes = Data(#"{"a":1,"b":"x",}"#.utf8)
        let store = store(holding: bytes)
        let (read, errors) = readings(store)
        #expect(read == Readings(v1: V1(a: 1, b: "x"), v2: V2(a: 1, bee: "x"), v3: V3(a: 1, bee: "x")))
        #expect(errors == [nil, nil, nil])
        #expect(stored(store) == bytes)
        #expect(store.contents.state.withLock { $0.values.count } == 1, "a copy was kept aside")
    }

    /// Members filled into an empty nested object, however its braces are spaced, go inside it.
    @Test(arguments: ["{}", "{ }", "{\n\t}", "{},"])
    func membersFilledIntoAnEmptyNestedObjectAreRead(empty: String) {
        let bytes = Data(#"{"a":1,"b":"x","bee":"x","c":2,"d":\#(empty)}"#.utf8)
        let store = store(holding: bytes)
        let (read, errors) = readings(store)
        #expect(read.v3 == V3(a: 1, bee: "x", c: 2, d: Inner(x: 0, y: 0)))
        #expect(errors == [nil, nil, nil])
        #expect(stored(store) == bytes)
    }

    /// Thousands of members no version knows, spelled oddly in UTF-16, survive a write of each version.
    @Test func thousandsOfOddlySpelledUnknownMembersSurviveEveryVersionsWrite() throws {
        var members = (0..<3_000).map { #""\u0075\#($0)" : [\#($0), {"k":\#($0)e0}] ,"u\#($0)":null"# }
        members += [#""a":1"#, #""b":"x""#, #""bee":"x""#, #""c":2"#, #""d":{"x":1,"y":2,}"#]
        let text = "{" + members.joined(separator: ",\n") + ",}"
        let store = store(holding: try #require(text.data(using: .utf16BigEndian)))
        for version in 1...3 { program(version, over: store).change(.a, to: 10 + version) }
        let written = try #require(stored(store))
        let after = try #require(JSONFill.object(written))
        // Each unknown name once, with the value the decoder read (the first), and the known ones.
        #expect(after.members.count == 3_000 + 5)
        #expect(readings(store).0.v3 == V3(a: 13, bee: "x", c: 2, d: Inner(x: 1, y: 2)))
        let probe = try JSONDecoder().decode([String: JSONValue].self, from: written)
        #expect(probe["u7"] == .array([.number(7), .object(["k": .number(7)])]))
    }

    /// A value filled from the default is taken at once when it keeps every member the decoder read, whatever a
    /// repeated name after the first holds: it is not read through a migration instead (which took `d` from its own
    /// conversion, not from the bytes, and wrote the value back, so reading wrote).
    @Test func aRepeatedNameAfterTheFirstDoesNotSendAFilledValueThroughAMigration() {
        let bytes = Data(#"{"a":1,"b":"x","bee":"x","c":2,"d":{"x":1},"d":{"q":1}}"#.utf8)
        let store = store(holding: bytes)
        let migrations = renamed3 + [.from(V2.self) { V3(a: $0.a, bee: $0.bee, c: $0.c, note: $0.note) }]
        let storage = WLStorage(
            key: Self.key, defaultValue: V3(), flushInterval: nil, store: MemoryStore(replicaOf: store),
            migrations: migrations)
        #expect(storage.wrappedValue == V3(a: 1, bee: "x", c: 2, d: Inner(x: 1, y: 0)))
        storage.flush()
        #expect(stored(store) == bytes, "reading wrote")
        #expect(store.contents.state.withLock { $0.values.count } == 1, "a copy was kept as before the type change")
    }

    // MARK: UTF-16 and UTF-32, which Foundation reads

    static let encodings: [String.Encoding] = [
        .utf16LittleEndian, .utf16BigEndian, .utf16, .utf32LittleEndian, .utf32BigEndian,
    ]

    /// Every step of a type change reads text in UTF-16 and UTF-32, as the decoder does: the old name of a renamed
    /// field wins (the new name's value was read), members are filled from the default (the value was the default).
    @Test(arguments: encodings)
    func everyVersionReadsAValueStoredInUTF16OrUTF32(encoding: String.Encoding) throws {
        let bytes = try #require(#"{"a":1,"b":"new","bee":"old","c":2,"d":{"x":3}}"#.data(using: encoding))
        let store = store(holding: bytes)
        let (read, errors) = readings(store)
        let expected = Readings(
            v1: V1(a: 1, b: "new"), v2: V2(a: 1, bee: "new", c: 2), v3: V3(a: 1, bee: "new", c: 2, d: Inner(x: 3)))
        #expect(read == expected)
        #expect(errors == [nil, nil, nil])
        #expect(stored(store) == bytes)
    }

    /// A write over UTF-16 or UTF-32 keeps the members its type does not know (they were dropped), and writes UTF-8.
    @Test(arguments: encodings)
    func aWriteOverUTF16OrUTF32KeepsTheMembersItsTypeDoesNotKnow(encoding: String.Encoding) throws {
        let text = #"{"a":1,"b":"x","bee":"x","c":2,"d":{"w":7,"x":3,"y":4},"z":[1]}"#
        let store = store(holding: try #require(text.data(using: encoding)))
        program(1, over: store).change(.a, to: 5)
        let after = try #require(stored(store))
        #expect(String(data: after, encoding: .utf8) == text.replacingOccurrences(of: #""a":1"#, with: #""a":5"#))
        let (read, _) = readings(store)
        #expect(read.v3 == V3(a: 5, bee: "x", c: 2, d: Inner(x: 3, y: 4)))
    }

    /// The same in a directory: each version reads the file as the decoder does, and a write keeps what it does not know.
    @Test(arguments: encodings)
    func eachVersionReadsAFileInUTF16OrUTF32AndItsWriteKeepsWhatItDoesNotKnow(encoding: String.Encoding) throws {
        try withTemporaryDirectory { directory in
            let text = #"{"a":1,"b":"new","bee":"old","c":2,"d":{"w":7,"x":3},"z":[1],}"#
            let bytes = try #require(text.data(using: encoding))
            let url = directory.appendingPathComponent(Self.key)
            try bytes.write(to: url)
            do {
                let v2 = WLStorage(
                    key: Self.key, defaultValue: V2(), flushInterval: nil, store: .directory(directory),
                    migrations: renamed)
                #expect(v2.wrappedValue == V2(a: 1, bee: "new", c: 2))
                v2.flush()
            }
            do {
                let v3 = WLStorage(
                    key: Self.key, defaultValue: V3(), flushInterval: nil, store: .directory(directory),
                    migrations: renamed3)
                #expect(v3.wrappedValue == V3(a: 1, bee: "new", c: 2, d: Inner(x: 3)))
                v3.flush()
            }
            #expect(try Data(contentsOf: url) == bytes, "reading wrote")
            do {
                let v1 = WLStorage(key: Self.key, defaultValue: V1(), flushInterval: nil, store: .directory(directory))
                #expect(v1.wrappedValue == V1(a: 1, b: "new"))
                v1.wrappedValue.a = 5
                v1.flush()
                #expect(v1.lastError == nil)
            }
            let written = try Data(contentsOf: url)
            #expect(unknownMembers(written) == [Array("[1]".utf8), Array("7".utf8)])
            let decoded = try #require(probe(written))
            #expect(decoded.readings.v3 == V3(a: 5, bee: "new", c: 2, d: Inner(x: 3)))
        }
    }

    /// A change written onto another program's UTF-32 (little-endian) keeps that program's change: the merge read
    /// UTF-32 in big-endian order only, and the change was written whole over it.
    @Test func aChangeWrittenOntoAnotherProgramsUTF32KeepsItsChange() throws {
        let store = store(holding: Data(#"{"a":1,"b":"x","bee":"x","c":2}"#.utf8))
        let writer = program(2, over: store)
        let other = try #require(#"{"a":1,"b":"y","bee":"y","c":2}"#.data(using: .utf32LittleEndian))
        store.contents.state.withLock { $0.values[Self.key] = other }
        writer.change(.c, to: 9)
        let (read, _) = readings(store)
        #expect(read.v2 == V2(a: 1, bee: "y", c: 9))
    }

    /// A member no version knows holding a string that is not UTF-8, which the decoder skips, is kept by a write, and
    /// the other members are read as before by every version.
    @Test func aWriteKeepsAnUnknownMemberWhoseStringIsNotUTF8() throws {
        var bytes = Data(#"{"a":1,"b":"x","bee":"x","c":2,"d":{"x":3,"y":4},"z":""#.utf8)
        bytes += [0xFF, 0xFE] + Data(#""}"#.utf8)
        let store = store(holding: bytes)
        #expect(readings(store).0.v3 == V3(a: 1, bee: "x", c: 2, d: Inner(x: 3, y: 4)))
        program(1, over: store).change(.a, to: 5)
        #expect(unknownMembers(stored(store)) == [[UInt8(ascii: "\""), 0xFF, 0xFE, UInt8(ascii: "\"")], nil])
        #expect(readings(store).0.v3 == V3(a: 5, bee: "x", c: 2, d: Inner(x: 3, y: 4)))
    }

    /// A set the writer did not change, stored in another order than its encoder writes it, is no change of its own: a
    /// change of another field written onto another program's keeps that program's change of the set (any two processes
    /// encode a `Set` in different orders; compared in order, the set counted as changed and was written over it). So
    /// for a set read at the start, and one adopted from another program's change while running.
    @Test(arguments: [false, true])
    func aSetStoredInAnotherOrderIsNoChangeOfTheWriters(adopted: Bool) throws {
        struct Tagged: Codable, Equatable, Sendable {
            var tags: Set<String> = []
            var count = 0
        }
        let tags: Set<String> = ["a", "b", "c", "d", "e", "f", "g", "h"]
        let order = try JSONDecoder().decode([String: [String]].self, from: JSONEncoder().encode(["tags": tags]))
        let reversed = try #require(order["tags"]).reversed().map { #""\#($0)""# }.joined(separator: ",")
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: adopted ? #"{"count":0}"# : #"{"count":1,"tags":[\#(reversed)]}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Tagged(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        if adopted { store.writeFromOutside(Self.key, json: #"{"count":1,"tags":[\#(reversed)]}"#) }
        #expect(eventually { writer.wrappedValue == Tagged(tags: tags, count: 1) })
        store.writeUnreported(Self.key, json: #"{"count":1,"tags":["z",\#(reversed)]}"#)
        writer.wrappedValue.count = 2
        writer.flush()
        let after = try #require(stored(store))
        #expect(try JSONDecoder().decode(Tagged.self, from: after) == Tagged(tags: tags.union(["z"]), count: 2))
    }

    /// A number read with more digits than the `Double` it is, which the writer encodes in the `Double`'s shortest
    /// spelling, is no change of its own: another program's change of it meanwhile stands.
    @Test func aNumberReadWithMoreDigitsThanItsDoubleIsNoChangeOfTheWriters() {
        struct Point: Codable, Equatable, Sendable {
            var x = 0.0
            var y = 0
        }
        let store = MemoryStore()
        store.writeUnreported(Self.key, json: #"{"x":0.10000000000000001,"y":1}"#)
        let writer = WLStorage(
            key: Self.key, defaultValue: Point(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(writer.wrappedValue == Point(x: 0.1, y: 1))
        store.writeUnreported(Self.key, json: #"{"x":0.5,"y":1}"#)
        writer.wrappedValue.y = 2
        writer.flush()
        #expect(stored(store).map { String(decoding: $0, as: UTF8.self) } == #"{"x":0.5,"y":2}"#)
    }

    // MARK: Numbers and strings the decoder reads and `JSONSerialization` does not

    /// Members no version knows that `JSONDecoder` reads (skips) while `JSONSerialization` does not, and no type reads:
    /// a number beyond a `Double`'s range, a string with a lone surrogate.
    static let unreadableMembers = ["1e400", "-1E+999", #""\ud800""#]

    /// A change written onto another program's keeps that program's change beside a member no type reads (the merge
    /// gave up on the whole object, and the change was written whole, over the other program's).
    @Test(arguments: unreadableMembers)
    func aChangeWrittenOntoAnotherProgramsKeepsItsChangeBesideAMemberNoTypeReads(member: String) {
        let store = store(holding: Data(#"{"a":1,"b":"x","bee":"x","c":2,"z":\#(member)}"#.utf8))
        let writer = program(2, over: store)
        store.contents.state.withLock {
            $0.values[Self.key] = Data(#"{"a":7,"b":"x","bee":"x","c":2,"z":\#(member)}"#.utf8)
        }
        writer.change(.c, to: 9)
        #expect(readings(store).0.v2 == V2(a: 7, bee: "x", c: 9))
        #expect(unknownMembers(stored(store)) == [Array(member.utf8), nil])
    }

    /// Bytes a version cannot map, beside a member no type reads, are another version's JSON: left as they are, not
    /// kept aside as not JSON (they were, when judged by `JSONSerialization`, which does not read the member).
    @Test(arguments: unreadableMembers)
    func bytesAVersionCannotMapBesideAMemberNoTypeReadsAreLeftAsTheyAre(member: String) {
        let bytes = Data(#"{"a":"one","b":"x","z":\#(member)}"#.utf8)
        let store = store(holding: bytes)
        let storage = WLStorage(
            key: Self.key, defaultValue: V1(), flushInterval: nil, store: MemoryStore(replicaOf: store))
        #expect(storage.wrappedValue == V1())
        storage.flush()
        #expect(storage.lastError?.code == .storedByAnotherVersion)
        #expect(stored(store) == bytes, "reading wrote")
        #expect(store.contents.state.withLock { $0.values.count } == 1, "a copy was kept aside")
    }

    // MARK: Members filled from the default

    /// A member a version filled from its default when it read is no change of its own: when another program stores
    /// that member meanwhile, a change of another field written onto it keeps the other program's value (taken against
    /// the bytes read, which lack the member, the filled value counted as one the writer added, and replaced it).
    @Test func aMemberFilledFromTheDefaultDoesNotReplaceAnotherProgramsValueOfIt() {
        let store = store(holding: Data(#"{"b":"x"}"#.utf8))
        let writer = program(1, over: store)
        store.contents.state.withLock { $0.values[Self.key] = Data(#"{"a":7,"b":"x"}"#.utf8) }
        writer.change(.b, to: 9)
        #expect(readings(store).0.v1 == V1(a: 7, b: "b9"))
    }

    /// Bytes spelled at random, read by each version, then changed one field at a time by random versions (rollbacks
    /// among them): every read is the decoder's, reading writes nothing, and nothing changes that no write changed.
    @Test(arguments: Spelling.allCases)
    func everyVersionReadsWhatTheDecoderReadsAndAChangeOfOneFieldChangesNoOther(spelling: Spelling) throws {
        let batch = 0
        var speller = Speller(random: SplitMix64(seed: 0x5EED_0000), spelling: spelling)
        for trial in 0..<40 {
            let document = Document.random(&speller)
            let bytes = document.bytes(&speller)
            let shown = "trial \(trial) of batch \(batch): \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            let decoded = try #require(probe(bytes), "the speller wrote what the decoder does not read: \(shown)")
            var expected = decoded.readings
            let store = MemoryStore()
            store.contents.state.withLock { $0.values[Self.key] = bytes }
            let (read, _) = readings(store)
            #expect(read == expected, "\(shown)")
            #expect(stored(store) == bytes, "reading wrote: \(shown)")
            let unknown = unknownMembers(bytes)
            for step in 0..<4 {
                let field = speller.pick(FieldChange.allCases)
                let version = speller.pick(field.versions)
                let value = 10 + trial * 10 + step
                program(version, over: store).change(field, to: value, byUpdate: speller.chance(50))
                field.apply(value, to: &expected)
                let after = stored(store)
                let (read, _) = readings(store)
                let context: String =
                    "\(shown); step \(step): version \(version) set \(field) to \(value), stored "
                    + String(decoding: after ?? Data(), as: UTF8.self)
                #expect(read == expected, "\(context)")
                #expect(unknownMembers(after) == unknown, "a member no version knows changed: \(context)")
                if read != expected { break }
            }
        }
    }

    /// Programs of each version running while another program stores oddly spelled bytes, and the feed tells them:
    /// each adopts what the decoder reads, writes nothing, and a later change of one field keeps every other.
    @Test(arguments: Spelling.allCases)
    func runningVersionsAdoptOddlySpelledBytesWithoutWritingAndKeepEveryFieldInTheirChanges(spelling: Spelling) {
        var speller = Speller(random: SplitMix64(seed: 0xADD0_0000), spelling: spelling)
        for trial in 0..<8 {
            let store = MemoryStore()
            store.writeFromOutside(Self.key, json: #"{"a":0,"b":"b0","bee":"b0","c":0,"d":{"x":0,"y":0}}"#)
            let s1 = WLStorage(
                key: Self.key, defaultValue: V1(), flushInterval: nil, store: MemoryStore(replicaOf: store))
            let s2 = WLStorage(
                key: Self.key, defaultValue: V2(), flushInterval: nil, store: MemoryStore(replicaOf: store),
                migrations: renamed)
            let s3 = WLStorage(
                key: Self.key, defaultValue: V3(), flushInterval: nil, store: MemoryStore(replicaOf: store),
                migrations: renamed3)
            _ = (s1.wrappedValue, s2.wrappedValue, s3.wrappedValue)
            let bytes = Document.random(&speller, complete: true).bytes(&speller)
            let shown = "trial \(trial): \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            guard let expected = probe(bytes)?.readings else {
                Issue.record("the speller wrote what the decoder does not read: \(shown)")
                continue
            }
            store.contents.state.withLock { $0.values[Self.key] = bytes }
            store.report(.key(Self.key))
            #expect(eventually(timeout: 30) { s1.wrappedValue == expected.v1 }, "\(s1.wrappedValue) \(shown)")
            #expect(eventually(timeout: 30) { s2.wrappedValue == expected.v2 }, "\(s2.wrappedValue) \(shown)")
            #expect(eventually(timeout: 30) { s3.wrappedValue == expected.v3 }, "\(s3.wrappedValue) \(shown)")
            s1.flush()
            s2.flush()
            s3.flush()
            #expect(stored(store) == bytes, "adopting wrote: \(shown)")
            // The oldest version changes one field: the others read every other field as before.
            s1.wrappedValue.a = 100 + trial
            s1.flush()
            var after = expected
            FieldChange.a.apply(100 + trial, to: &after)
            #expect(readings(store).0 == after, "\(shown): \(String(decoding: stored(store) ?? Data(), as: UTF8.self))")
        }
    }

    /// Two programs of different versions change different fields of oddly spelled bytes, the second without having
    /// heard of the first's change: its change goes onto the first's, field by field, and both stay.
    @Test(arguments: Spelling.allCases)
    func twoVersionsChangingDifferentFieldsOfOddlySpelledBytesKeepBothChanges(spelling: Spelling) throws {
        let batch = 0
        var speller = Speller(random: SplitMix64(seed: 0xC0C0_0000), spelling: spelling)
        for trial in 0..<40 {
            var document = Document.random(&speller, complete: true)
            let bytes = document.bytes(&speller)
            let shown = "trial \(trial) of batch \(batch): \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            let decoded = try #require(probe(bytes), "\(shown)")
            var expected = decoded.readings
            let store = MemoryStore()
            store.contents.state.withLock { $0.values[Self.key] = bytes }
            // The program that writes second reads first.
            let version = Int(speller.random.next() % 3) + 1
            let field = speller.pick(FieldChange.allCases.filter { $0.versions.contains(version) })
            let value = 100 + trial
            let writer = program(version, over: store)
            // Another program, not heard of, stores another field's change in a spelling of its own.
            let other = speller.pick(FieldChange.allCases.filter { $0 != field })
            let otherValue = 200 + trial
            switch other {
            case .a: document.a = otherValue
            case .b: (document.b, document.bee) = ("b\(otherValue)", "b\(otherValue)")
            case .c: document.c = otherValue
            case .x: document.d?.x = otherValue
            case .y: document.d?.y = otherValue
            case .note: document.note = "n\(otherValue)"
            }
            var otherBytes = document.bytes(&speller)
            if speller.chance(50) {
                // Or a program of some version that knows the field, which writes the package's plain JSON.
                program(speller.pick(other.versions), over: store).change(other, to: otherValue)
                otherBytes = stored(store) ?? Data()
            } else {
                store.contents.state.withLock { $0.values[Self.key] = otherBytes }
            }
            other.apply(otherValue, to: &expected)
            writer.change(field, to: value)
            field.apply(value, to: &expected)
            let after = stored(store)
            let (read, _) = readings(store)
            let context =
                "\(shown); another stored \(other) = \(otherValue) as \(String(decoding: otherBytes, as: UTF8.self)), "
                + "then version \(version) set \(field) to \(value): \(String(decoding: after ?? Data(), as: UTF8.self))"
            #expect(read == expected, "\(context)")
            #expect(
                unknownMembers(after) == unknownMembers(otherBytes), "a member no version knows changed: \(context)")
        }
    }
}

/// A program of one version with a storage opened (it has read the key) that changes one field.
private protocol Changer {
    /// Sets `field` to `value`, by a set or (on condition, in the store) by an update, and flushes.
    func change(_ field: FieldChange, to value: Int, byUpdate: Bool)
}

extension Changer {
    func change(_ field: FieldChange, to value: Int) { change(field, to: value, byUpdate: false) }
}

private struct Program<T: Codable & Sendable & Equatable>: Changer {
    let storage: WLStorage<T>

    init(store: MemoryStore, migrations: [WLStorageMigration<T>]) {
        storage = WLStorage(
            key: StoredJSONSpellingsTests.key, defaultValue: Self.defaultValue, flushInterval: nil,
            store: MemoryStore(replicaOf: store), migrations: migrations)
        _ = storage.wrappedValue
    }

    static var defaultValue: T {
        switch T.self {
        case is V1.Type: V1() as! T
        case is V2.Type: V2() as! T
        default: V3() as! T
        }
    }

    func change(_ field: FieldChange, to value: Int, byUpdate: Bool) {
        if byUpdate {
            storage.update { $0 = Self.changing($0, field, to: value) }
        } else {
            storage.wrappedValue = Self.changing(storage.wrappedValue, field, to: value)
        }
        storage.flush()
    }

    static func changing(_ old: T, _ field: FieldChange, to value: Int) -> T {
        var any: Any = old
        switch any {
        case var v as V1:
            switch field {
            case .a: v.a = value
            case .b: v.b = "b\(value)"
            case .note: v.note = "n\(value)"
            default: Issue.record("V1 does not know \(field)")
            }
            any = v
        case var v as V2:
            switch field {
            case .a: v.a = value
            case .b: v.bee = "b\(value)"
            case .c: v.c = value
            case .note: v.note = "n\(value)"
            default: Issue.record("V2 does not know \(field)")
            }
            any = v
        case var v as V3:
            switch field {
            case .a: v.a = value
            case .b: v.bee = "b\(value)"
            case .c: v.c = value
            case .x: v.d.x = value
            case .y: v.d.y = value
            case .note: v.note = "n\(value)"
            }
            any = v
        default:
            Issue.record("no version")
        }
        return any as! T
    }
}
