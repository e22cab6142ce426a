import Foundation

/// Fields of a stored JSON object that the current type does not know survive its writes, so an older version in a
/// fleet does not lose what a newer one stored. A write adds every member of the *base* (the object a backer last read
/// or wrote) the type does not know, where both hold an object; arrays, and nested objects sharing no member (another
/// enum case), are taken whole. A member is *known* when the value's encoding decodes differently without it, so a
/// `nil` optional is removed while a newer field is kept.
package enum UnknownFields {
    /// `data` itself when it is a JSON object, which a write may need to keep members of; `nil` otherwise.
    package static func base(_ data: Data) -> Data? {
        // Whitespace, a byte order mark and UTF-16's or UTF-32's zeros may come first: bytes below 0x21 or above 0xBA.
        let first = data.withUnsafeBytes { $0.first { (0x21...0xBA).contains($0) } }
        return first == UInt8(ascii: "{") ? data : nil
    }

    /// `encoded`, a value of `type`, with the members of `base` that `type` does not know added; `nil` when none.
    package static func merging<T: Codable>(_ encoded: Data, keepingUnknownOf base: Data, as type: T.Type) -> Data? {
        guard case let (baseBytes, baseMembers, _)? = JSONFill.object(base),
            case let (encodedBytes, encodedMembers, _)? = JSONFill.object(encoded)
        else { return nil }
        // A one-member value holding an object sharing nothing with the stored one: an enum case replacing another.
        if encodedMembers.count == 1, case .object = encodedMembers[0].value,
            !baseMembers.contains(where: { $0.key == encodedMembers[0].key })
        {
            return nil
        }
        var candidates: [[String]] = []
        collectMissing(baseMembers, from: encodedMembers, at: [], into: &candidates)
        guard !candidates.isEmpty else { return nil }
        func decoded(_ bytes: [UInt8]) -> Data? {
            guard let value = try? JSONCoders.decoder.decode(T.self, from: Data(bytes)) else { return nil }
            return try? JSONCoders.encoder.encode(value)
        }
        // A value that does not read back from its own encoding gives nothing to judge members by.
        guard let target = decoded(encodedBytes) else { return nil }
        // Members the type writes for the stored value are its own.
        if let whole = decoded(baseBytes) { candidates.removeAll(where: written(in: whole)) }
        let baseLookup = Lookup(baseMembers)
        func merged(keeping kept: ArraySlice<[String]>) -> [UInt8] {
            merge(encodedMembers, in: encodedBytes, with: baseLookup, in: baseBytes, keeping: kept)
        }
        guard !candidates.isEmpty else { return nil }
        // All at once first; then those the type writes back from the value with all of them are its own.
        let all = merged(keeping: candidates[...])
        guard let withAll = decoded(all) else { return judgedInGroups(candidates, merged: merged, decoded, target) }
        if same(withAll, target) { return Data(all) }
        candidates.removeAll(where: written(in: withAll))
        return judgedInGroups(candidates, merged: merged, decoded, target)
    }

    /// At most this many decodes judge the members in groups; a group not judged by then is left out.
    package static let maximumGroupTests = 64

    /// Group testing: a group whose members leave the value as it is is kept whole; one that changes it is split.
    private static func judgedInGroups(
        _ candidates: [[String]], merged: (ArraySlice<[String]>) -> [UInt8], _ decoded: ([UInt8]) -> Data?,
        _ target: Data
    ) -> Data? {
        var unknown: [[String]] = []
        var groups: [ArraySlice<[String]>] = candidates.isEmpty ? [] : [candidates[...]]
        var tested = 0
        while tested < maximumGroupTests, let group = groups.popLast() {
            tested += 1
            if same(decoded(merged(group)), target) {
                unknown += group
            } else if group.count > 1 {
                let middle = group.startIndex + group.count / 2
                groups.append(group[middle...])
                groups.append(group[..<middle])
            }
        }
        guard !unknown.isEmpty else { return nil }
        let result = merged(unknown[...])
        // Groups judged apart are checked together, so that what is written always reads back as the value.
        guard tested == 1 || same(decoded(result), target) else { return nil }
        return Data(result)
    }

    /// Whether two encodings of one type are of the same value: equal bytes, or equal but for array order (a `Set`).
    package static func same(_ encoding: Data?, _ target: Data) -> Bool {
        guard let encoding else { return false }
        if encoding == target { return true }
        guard encoding.count == target.count,
            let one = try? JSONSerialization.jsonObject(with: encoding, options: .fragmentsAllowed),
            let other = try? JSONSerialization.jsonObject(with: target, options: .fragmentsAllowed)
        else { return false }
        return canonical(one) == canonical(other)
    }

    /// A JSON value as text, with the members of objects sorted by key and the elements of arrays sorted.
    private static func canonical(_ value: Any) -> String {
        switch value {
        case let object as [String: Any]:
            let members = object.keys.sorted().map { String(reflecting: $0) + ":" + canonical(object[$0]!) }
            return "{" + members.joined(separator: ",") + "}"
        case let array as [Any]:
            return "[" + array.map(canonical).sorted().joined(separator: ",") + "]"
        case let string as String:
            return String(reflecting: string)
        case is NSNull:
            return "null"
        default:
            return "\(value)"
        }
    }

    /// Whether a path names a member that the object `encoding` holds.
    private static func written(in encoding: Data) -> ([String]) -> Bool {
        guard let members = JSONFill.object(encoding)?.members else { return { _ in false } }
        let lookup = Lookup(members)
        return { lookup.contains($0[...]) }
    }

    /// An object's members by key (the first of a repeated key, as the decoder takes it), with theirs.
    private struct Lookup {
        var members: [String: (member: JSONFill.Member, inner: Lookup?)] = [:]

        init(_ list: [JSONFill.Member]) {
            for member in list where members[member.key] == nil {
                let inner: Lookup? = if case .object(let inner, _) = member.value { Lookup(inner) } else { nil }
                members[member.key] = (member, inner)
            }
        }

        func contains(_ path: ArraySlice<String>) -> Bool {
            guard let first = path.first, let found = members[first] else { return false }
            guard path.count > 1 else { return true }
            return found.inner?.contains(path.dropFirst()) ?? false
        }
    }

    /// The paths of `base`'s members that `encoded` lacks, looking into objects both have; a repeated key counts once.
    private static func collectMissing(
        _ base: [JSONFill.Member], from encoded: [JSONFill.Member], at path: [String], into paths: inout [[String]]
    ) {
        let encodedByKey = Dictionary(encoded.map { ($0.key, $0) }) { _, last in last }
        var seen: Set<String> = []
        for member in base where seen.insert(member.key).inserted {
            guard let counterpart = encodedByKey[member.key] else {
                paths.append(path + [member.key])
                continue
            }
            // A nested object with no member in common with the value's is replaced whole (another enum case).
            if case .object(let inner, _) = member.value, case .object(let encodedInner, _) = counterpart.value {
                let encodedKeys = Set(encodedInner.map(\.key))
                if encodedKeys.isEmpty || inner.contains(where: { encodedKeys.contains($0.key) }) {
                    collectMissing(inner, from: encodedInner, at: path + [member.key], into: &paths)
                }
            }
        }
    }

    /// The members of `encoded` with `base`'s at the paths in `kept` added, sorted by key as the encoder sorts them.
    private static func merge(
        _ encoded: [JSONFill.Member], in encodedBytes: [UInt8], with base: Lookup, in baseBytes: [UInt8],
        keeping kept: ArraySlice<[String]>
    ) -> [UInt8] {
        var here: Set<String> = []
        var below: [String: [[String]]] = [:]
        for path in kept {
            if path.count == 1 {
                here.insert(path[0])
            } else {
                below[path[0], default: []].append(Array(path.dropFirst()))
            }
        }
        var parts = encoded.map { member -> (key: String, bytes: [UInt8]) in
            guard let paths = below[member.key], case .object(let inner, _) = member.value,
                let baseInner = base.members[member.key]?.inner
            else { return (member.key, raw(member, in: encodedBytes)) }
            let merged = merge(inner, in: encodedBytes, with: baseInner, in: baseBytes, keeping: paths[...])
            return (member.key, [UInt8](encodedBytes[member.rawKey]) + [UInt8(ascii: ":")] + merged)
        }
        parts += here.compactMap { base.members[$0]?.member }.map { ($0.key, raw($0, in: baseBytes)) }
        parts.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return object(parts.map(\.bytes))
    }

    private static func raw(_ member: JSONFill.Member, in bytes: [UInt8]) -> [UInt8] {
        [UInt8](bytes[member.rawKey]) + [UInt8(ascii: ":")] + [UInt8](bytes[member.value.range])
    }

    private static func object(_ parts: [[UInt8]]) -> [UInt8] {
        [UInt8(ascii: "{")] + parts.joined(separator: [UInt8(ascii: ",")]) + [UInt8(ascii: "}")]
    }
}
