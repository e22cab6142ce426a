import Foundation

/// A change made over bytes another program has replaced since, taken onto what is stored now, field by field: a
/// three-way merge of JSON objects (a JSON Merge Patch of the change). Unchanged members keep what is stored, byte for
/// byte; non-objects are taken whole; members are written sorted by name.
package enum FieldMerge {
    /// The bytes of `stored` with the changes `value` makes to `base`, or `nil` when one of the three is not JSON. With
    /// `replacingCases`, a value object sharing no member with base or stored is taken whole (another enum case).
    package static func merge(base: Data, value: Data, stored: Data, replacingCases: Bool = false) -> Data? {
        guard let base = Piece(base), let value = Piece(value), let stored = Piece(stored) else { return nil }
        return merge(base: base, value: value, stored: stored, replacingCases: replacingCases).map { Data($0) }
    }

    /// `merged` with the top members of `value` it lacks (removed by another program); `nil` when none, or not objects.
    package static func filling(_ merged: Data, from value: Data) -> Data? {
        guard let members = Piece(merged)?.members, let valueMembers = Piece(value)?.members,
            valueMembers.keys.contains(where: { members[$0] == nil })
        else { return nil }
        return Data(object(members.merging(valueMembers) { kept, _ in kept }.mapValues { ($0.key, $0.piece.bytes) }))
    }

    /// The member to write (`nil`: none): stored where the base is unchanged, merged where all are objects, else ours.
    private static func merge(base: Piece?, value: Piece?, stored: Piece?, replacingCases: Bool) -> ArraySlice<UInt8>? {
        if value?.value == base?.value { return stored?.bytes }
        guard let baseMembers = base?.members, let valueMembers = value?.members, let storedMembers = stored?.members,
            !replacingCases || (!disjoint(valueMembers, baseMembers) && !disjoint(valueMembers, storedMembers))
        else { return value?.bytes }
        var members = storedMembers.mapValues { ($0.key, $0.piece.bytes) }
        for name in Set(baseMembers.keys).union(valueMembers.keys) {
            let key = storedMembers[name]?.key ?? valueMembers[name]?.key ?? baseMembers[name]?.key ?? []
            members[name] = merge(
                base: baseMembers[name]?.piece, value: valueMembers[name]?.piece, stored: storedMembers[name]?.piece,
                replacingCases: replacingCases
            ).map { (key, $0) }
        }
        return object(members)[...]
    }

    /// Whether two objects, neither empty, have no member in common.
    private static func disjoint(_ one: [String: Piece.Member], _ other: [String: Piece.Member]) -> Bool {
        !one.isEmpty && !other.isEmpty && !one.keys.contains { other[$0] != nil }
    }

    /// The bytes of an object of `members`: each key and value as read, in the order of their names.
    private static func object(_ members: [String: (key: ArraySlice<UInt8>, bytes: ArraySlice<UInt8>)]) -> [UInt8] {
        let written = members.sorted { $0.key < $1.key }.map { $0.value.key + [UInt8(ascii: ":")] + $0.value.bytes }
        return [UInt8(ascii: "{")] + written.joined(separator: [UInt8(ascii: ",")]) + [UInt8(ascii: "}")]
    }

    /// A JSON value as Foundation reads it, with the bytes it was read from: compared as read, written as it was.
    fileprivate struct Piece {
        /// A member of an object: its key as written (quoted, escapes kept), and its value.
        typealias Member = (key: ArraySlice<UInt8>, piece: Piece)

        let value: JSONValue
        /// The bytes of the whole text, and where this value is in them.
        let text: [UInt8]
        let node: JSONFill.Node

        var bytes: ArraySlice<UInt8> { text[node.range] }

        /// The members by name (the first of a name, as the decoder takes it), when an object; `nil` otherwise.
        var members: [String: Member]? {
            guard case .object(let values) = value, case .object(let members, _) = node else { return nil }
            var byName: [String: Member] = [:]
            for member in members where byName[member.key] == nil {
                guard let value = values[member.key] else { continue }
                byName[member.key] = (text[member.rawKey], Piece(value: value, text: text, node: member.value))
            }
            return byName
        }
    }
}

extension FieldMerge.Piece {
    /// The value of `data` and its bytes, as UTF-8 (see ``JSONFill/parsed(_:)``).
    init?(_ data: Data) {
        guard let value = try? JSONCoders.decoder.decode(JSONValue.self, from: data),
            let (text, node) = JSONFill.parsed(data)
        else { return nil }
        self.init(value: value, text: text, node: node)
    }
}
