import Foundation
import Synchronization

/// How stored bytes became the value: the layer between the bytes any store holds and the storage's type.
///
/// Bytes that decode as the type are the value. Bytes that do not are tried twice more before they count as
/// undecodable: with the fields they lack taken from the default value's JSON (a type that gained a field), then
/// through the storage's migrations, in order (a type that was renamed, reshaped or retyped). Only the first step
/// runs for bytes in the current shape, so a matching value costs what a plain decode costs.
struct ValueDecoding<T: Codable & Sendable> {
    /// Makes the value whose fields fill in those that stored bytes lack; `nil` for none. Called only for bytes that
    /// do not decode as they are.
    let defaultValue: (() -> T)?
    let migrations: [WLStorageMigration<T>]

    static var plain: Self { Self(defaultValue: nil, migrations: []) }

    /// How bytes that are not in the current shape became the value.
    enum Reshape: Sendable, Equatable {
        /// The fields they lacked were taken from the default value.
        case filledIn
        /// The migration from this type converted them.
        case migrated(from: String)

        /// For messages: "lacked fields, which were taken from the default value".
        var description: String {
            switch self {
            case .filledIn: "lacked fields of the current type, which were taken from the default value"
            case .migrated(let type): "were in the shape of \(type), and were migrated"
            }
        }
    }

    /// What the bytes decode to.
    enum Outcome {
        /// The value, and how it was reshaped; `nil` when the bytes were in its shape.
        case decoded(T, Reshape?)
        /// Nothing decodes them: the error of decoding them as the type, and what the migrations that decoded them
        /// threw.
        case undecodable(any Error, migrationFailures: [String])
    }

    func decode(_ data: Data) -> Outcome {
        let firstError: any Error
        do {
            return .decoded(try JSONCoders.decoder.decode(T.self, from: data), nil)
        } catch {
            firstError = error
        }
        // The value with the fields the bytes lack filled in, when it keeps some of theirs: whether it keeps all.
        var filledIn: (value: T, keepsAll: Bool)?
        if let defaultValue, let defaults = try? JSONCoders.encoder.encode(defaultValue()),
            let value = JSONFill.fillingLeast(data, from: defaults, as: T.self),
            let encoded = try? JSONCoders.encoder.encode(value)
        {
            let coverage = JSONFill.coverage(of: data, in: encoded)
            if coverage.all { return .decoded(value, .filledIn) }
            if coverage.any { filledIn = (value, false) }
        }
        var failures: [String] = []
        for migration in migrations {
            switch migration.attempt(data) {
            case .notDecoded:
                continue
            case .converted(let value):
                // A value that cannot be encoded could never be written back: the migration does not apply.
                guard (try? JSONCoders.encoder.encode(value)) != nil else {
                    failures.append("the migration from \(migration.sourceType) made a value that does not encode")
                    continue
                }
                return .decoded(value, .migrated(from: migration.sourceType))
            case .failed(let error):
                failures.append("the migration from \(migration.sourceType) threw \(error)")
            }
        }
        if let filledIn { return .decoded(filledIn.value, .filledIn) }
        return .undecodable(firstError, migrationFailures: failures)
    }

    /// Decodes bytes that another program stored, or throws what ``decode(_:)`` found.
    func value(of data: Data) throws(DecodingFailure) -> T {
        switch decode(data) {
        case .decoded(let value, _): return value
        case .undecodable(let error, let failures): throw DecodingFailure(error: error, migrationFailures: failures)
        }
    }

    /// Why bytes did not decode, in the words of an error message: what is wrong with them, and the migrations that
    /// threw.
    static func judge(_ data: Data, migrationFailures: [String]) -> String {
        let base = "\(JSONCoders.judge(data)) \(T.self)"
        guard !migrationFailures.isEmpty else { return base }
        return base + " (" + migrationFailures.joined(separator: "; ") + ")"
    }
}

/// Bytes that decoded through no step of ``ValueDecoding``.
struct DecodingFailure: Error {
    let error: any Error
    let migrationFailures: [String]
}

/// The added-fields step: a JSON object completed with the members it lacks from another, recursively.
///
/// Bytes filled in this way are taken when the value keeps every field they have: the type gained fields. When the
/// value drops some of them, a migration whose type decodes the bytes is preferred (a field renamed would otherwise be
/// dropped and its value replaced by the default's), and the filled-in value is taken only when none does. When the
/// value keeps none of the bytes' fields, they are not taken for this type at all: an object of another type is not
/// read as a default.
enum JSONFill {
    /// Whether the value encoded as `encoded` keeps the members of `stored`: all of them (at every depth where both
    /// have an object), and any of them (at the top).
    static func coverage(of stored: Data, in encoded: Data) -> (all: Bool, any: Bool) {
        var storedBytes = [UInt8](stored)
        if storedBytes.starts(with: [0xEF, 0xBB, 0xBF]) { storedBytes.removeFirst(3) }
        let encodedBytes = [UInt8](encoded)
        var storedParser = Parser(bytes: storedBytes)
        var encodedParser = Parser(bytes: encodedBytes)
        guard case .object(let storedMembers)? = storedParser.parseValue(depth: 0),
            case .object(let encodedMembers)? = encodedParser.parseValue(depth: 0)
        else { return (false, false) }
        let any = storedMembers.contains { member in encodedMembers.contains { $0.key == member.key } }
        return (keepsAll(storedMembers, encodedMembers), any)
    }

    private static func keepsAll(_ stored: [Member], _ encoded: [Member]) -> Bool {
        var byKey: [String: Member] = [:]
        for member in encoded { byKey[member.key] = member }
        return stored.allSatisfy { member in
            guard let kept = byKey[member.key] else { return false }
            if case .object(let inner) = member.value, case .object(let keptInner) = kept.value {
                return keepsAll(inner, keptInner)
            }
            return true
        }
    }

    /// `data` with every member of `defaults` it lacks added, in objects at any depth where both have an object;
    /// `data`'s members win, and arrays are taken as they are. `nil` when `data` is not JSON, when either is not an
    /// object, or when nothing is missing. Numbers, strings and literals are copied byte for byte.
    static func filling(_ data: Data, from defaults: Data) -> Data? {
        filling(data, from: defaults, excluding: []).map { Data($0.bytes) }
    }

    /// The value of `type` from `data` with the fewest members of `defaults` filled in: every member the value decodes
    /// without is left out, so that an optional the stored value left out because it was `nil`, or an entry removed
    /// from a dictionary, does not come back from the default. `nil` when no filling decodes.
    static func fillingLeast<T: Decodable>(_ data: Data, from defaults: Data, as type: T.Type) -> T? {
        func decode(_ excluded: Set<[String]>) -> (T, [[String]])? {
            guard let filled = filling(data, from: defaults, excluding: excluded),
                let value = try? JSONCoders.decoder.decode(T.self, from: Data(filled.bytes))
            else { return nil }
            return (value, filled.added)
        }
        guard var (value, added) = decode([]) else { return nil }
        var excluded: Set<[String]> = []
        for path in added {
            excluded.insert(path)
            if let fewer = decode(excluded) {
                value = fewer.0
            } else {
                excluded.remove(path)
            }
        }
        added = added.filter { !excluded.contains($0) }
        return added.isEmpty ? nil : value
    }

    /// `data` with the members of `defaults` it lacks, but those at the paths in `excluded`, and the paths of the
    /// members added; `nil` when `data` is not JSON, when either is not an object, or when nothing is added.
    private static func filling(
        _ data: Data, from defaults: Data, excluding excluded: Set<[String]>
    ) -> (bytes: [UInt8], added: [[String]])? {
        var stored = [UInt8](data)
        // A byte order mark, which the decoder accepts, is left out of the filled-in bytes.
        if stored.starts(with: [0xEF, 0xBB, 0xBF]) { stored.removeFirst(3) }
        guard JSONValidator.problem(in: stored) == nil else { return nil }
        let model = [UInt8](defaults)
        var storedParser = Parser(bytes: stored)
        var modelParser = Parser(bytes: model)
        guard case .object(let storedMembers)? = storedParser.parseValue(depth: 0),
            case .object(let modelMembers)? = modelParser.parseValue(depth: 0)
        else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(stored.count + model.count)
        var filler = Filler(stored: stored, model: model, excluded: excluded)
        filler.write(storedMembers, filledFrom: modelMembers, at: [], into: &output)
        return filler.added.isEmpty ? nil : (output, filler.added)
    }

    /// A parsed JSON value: an object's members, or the range of any other value.
    private indirect enum Node {
        case object([Member])
        case other(Range<Int>)
    }

    private struct Member {
        /// The key as written, quotes included.
        var rawKey: Range<Int>
        /// The key itself, escapes resolved, for comparing keys however they are written.
        var key: String
        var value: Node
    }

    /// Writes objects completed from the model's members, recording the paths of the members it adds.
    private struct Filler {
        let stored: [UInt8]
        let model: [UInt8]
        let excluded: Set<[String]>
        var added: [[String]] = []

        /// Writes an object: `members`, each completed from the member of the same key in `model`, then the members
        /// of `model` it lacks, but those excluded.
        mutating func write(
            _ members: [Member], filledFrom model: [Member], at path: [String], into output: inout [UInt8]
        ) {
            var modelByKey: [String: Member] = [:]
            for member in model where modelByKey[member.key] == nil { modelByKey[member.key] = member }
            var written = Set(members.map(\.key))
            output.append(UInt8(ascii: "{"))
            var first = true
            func separate(_ output: inout [UInt8]) {
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
            }
            for member in members {
                separate(&output)
                output += stored[member.rawKey]
                output.append(UInt8(ascii: ":"))
                if case .object(let inner) = member.value, let other = modelByKey[member.key],
                    case .object(let innerModel) = other.value
                {
                    write(inner, filledFrom: innerModel, at: path + [member.key], into: &output)
                } else {
                    JSONFill.writeAsIs(member.value, from: stored, into: &output)
                }
            }
            for member in model where !written.contains(member.key) {
                written.insert(member.key)
                let memberPath = path + [member.key]
                if excluded.contains(memberPath) { continue }
                separate(&output)
                output += self.model[member.rawKey]
                output.append(UInt8(ascii: ":"))
                JSONFill.writeAsIs(member.value, from: self.model, into: &output)
                added.append(memberPath)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func writeAsIs(_ node: Node, from bytes: [UInt8], into output: inout [UInt8]) {
        switch node {
        case .other(let range):
            output += bytes[range]
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                output += bytes[member.rawKey]
                output.append(UInt8(ascii: ":"))
                writeAsIs(member.value, from: bytes, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// A parser of JSON text already known to be valid: it finds where values start and end, and parses objects
    /// into members; anything else it only skips.
    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) {
            self.bytes = bytes
        }

        /// Objects nest no deeper than the validator allows; this bound only keeps a wrong input from recursing far.
        private static let maximumDepth = 1_024

        mutating func parseValue(depth: Int) -> Node? {
            skipWhitespace()
            guard index < bytes.count, depth < Self.maximumDepth else { return nil }
            if bytes[index] == UInt8(ascii: "{") { return parseObject(depth: depth) }
            let start = index
            guard skipValue() else { return nil }
            return .other(start..<index)
        }

        private mutating func parseObject(depth: Int) -> Node? {
            index += 1  // {
            var members: [Member] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                let keyStart = index
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), skipString() else { return nil }
                let rawKey = keyStart..<index
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                guard let value = parseValue(depth: depth + 1), let key = Self.key(bytes[rawKey]) else { return nil }
                members.append(Member(rawKey: rawKey, key: key, value: value))
                skipWhitespace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { return nil }
                index += 1
                return .object(members)
            }
        }

        /// The string a quoted key stands for.
        private static func key(_ quoted: ArraySlice<UInt8>) -> String? {
            if !quoted.contains(UInt8(ascii: "\\")) {
                return String(decoding: quoted.dropFirst().dropLast(), as: UTF8.self)
            }
            return try? JSONCoders.decoder.decode(String.self, from: Data(quoted))
        }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): index += 1
                default: return
                }
            }
        }

        /// Skips a string, an array, a number or a literal.
        private mutating func skipValue() -> Bool {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return skipString()
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                var depth = 0
                while index < bytes.count {
                    switch bytes[index] {
                    case UInt8(ascii: "\""):
                        guard skipString() else { return false }
                        continue
                    case UInt8(ascii: "["), UInt8(ascii: "{"):
                        depth += 1
                    case UInt8(ascii: "]"), UInt8(ascii: "}"):
                        depth -= 1
                        if depth == 0 {
                            index += 1
                            return true
                        }
                    default:
                        break
                    }
                    index += 1
                }
                return false
            default:
                let start = index
                while index < bytes.count {
                    switch bytes[index] {
                    case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: " "),
                        UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                        return index > start
                    default:
                        index += 1
                    }
                }
                return index > start
            }
        }

        /// Skips a string from its opening quote to past its closing one.
        private mutating func skipString() -> Bool {
            index += 1
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\\"): index += 2
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                default: index += 1
                }
            }
            return false
        }
    }
}

/// The backers that keep a stored value's bytes from before its type changed, to remove once they have written the
/// value in the current shape. A table rather than a flag in each backer, which would make every backer larger for
/// what happens once in a type's life; writes look it up only while it is not empty.
enum KeptOriginals {
    private static let backers = Lock(Set<ObjectIdentifier>())
    private static let count = Atomic<Int>(0)

    /// Whether any backer keeps bytes: one atomic load, before a write looks further.
    static var any: Bool { count.load(ordering: .relaxed) > 0 }

    static func keep(_ backer: AnyObject) {
        backers.withLock { backers in
            if backers.insert(ObjectIdentifier(backer)).inserted { count.add(1, ordering: .relaxed) }
        }
    }

    /// Whether `backer` kept bytes; it no longer counts as keeping them.
    static func take(_ backer: AnyObject) -> Bool {
        backers.withLock { backers in
            guard backers.remove(ObjectIdentifier(backer)) != nil else { return false }
            count.subtract(1, ordering: .relaxed)
            return true
        }
    }

    /// Called as a backer goes: its identifier may be reused by another object.
    static func forget(_ backer: AnyObject) {
        guard any else { return }
        _ = take(backer)
    }
}
