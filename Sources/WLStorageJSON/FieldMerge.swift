import Foundation

/// A change made over bytes another program has replaced since, taken onto what is stored now, field by field: a
/// three-way merge of JSON objects (a JSON Merge Patch of the change). Members the writer left unchanged keep what is
/// stored; ones it changed, added or removed are written so; non-objects are taken whole. So the last writer of a
/// field wins, and changes to different fields are both kept.
package enum FieldMerge {
    /// The bytes of `stored` with the changes `value` makes to `base`, or `nil` when one of the three is not JSON. With
    /// `replacingCases`, a value object sharing no member with base or stored is taken whole (another enum case).
    package static func merge(base: Data, value: Data, stored: Data, replacingCases: Bool = false) -> Data? {
        guard let base = try? JSONCoders.decoder.decode(JSONValue.self, from: base),
            let value = try? JSONCoders.decoder.decode(JSONValue.self, from: value),
            let stored = try? JSONCoders.decoder.decode(JSONValue.self, from: stored)
        else { return nil }
        // The whole value removed by this writer is no JSON to write: the value's own bytes stand.
        return merge(base: base, value: value, stored: stored, replacingCases: replacingCases).flatMap {
            try? JSONCoders.encoder.encode($0)
        }
    }

    /// `merged` with the top members of `value` it lacks (removed by another program); `nil` when none, or not objects.
    package static func filling(_ merged: Data, from value: Data) -> Data? {
        guard case .object(var members)? = try? JSONCoders.decoder.decode(JSONValue.self, from: merged),
            case .object(let valueMembers)? = try? JSONCoders.decoder.decode(JSONValue.self, from: value)
        else { return nil }
        let missing = valueMembers.filter { members[$0.key] == nil }
        guard !missing.isEmpty else { return nil }
        members.merge(missing) { stored, _ in stored }
        return try? JSONCoders.encoder.encode(JSONValue.object(members))
    }

    /// The member to write (`nil`: none): stored where the base is unchanged, merged where all are objects, else ours.
    private static func merge(
        base: JSONValue?, value: JSONValue?, stored: JSONValue?, replacingCases: Bool
    ) -> JSONValue? {
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

    /// Whether two objects, neither empty, have no member in common.
    private static func disjoint(_ one: [String: JSONValue], _ other: [String: JSONValue]) -> Bool {
        !one.isEmpty && !other.isEmpty && !one.keys.contains { other[$0] != nil }
    }
}

/// Any JSON value as Foundation reads it: integers exact (`Int64`/`UInt64`), other numbers `Double`, or `Decimal`
/// when they have more digits than a `Double` holds, so a merged amount is not rounded.
package enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case number(Double)
    case decimal(Decimal)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let exact = try? container.decode(Decimal.self) {
            // Foundation reads integers and `Double`s through a `Double`: each is taken only when it holds every digit.
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
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
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
