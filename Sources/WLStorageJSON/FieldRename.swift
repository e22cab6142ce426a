import Foundation

/// A field renamed while programs that know only its old name still run: reads the old name, writes both. When they
/// differ, the old name's value is the newer (this version writes both alike).
package struct FieldRename: Sendable, Equatable {
    package let old: String
    package let new: String

    package init(old: String, new: String) {
        self.old = old
        self.new = new
    }

    /// `data` with each new name holding its old name's value where that differs; `data` itself otherwise.
    package static func reading(_ data: Data, _ renames: [FieldRename]) -> Data {
        renames.reduce(data) { data, rename in copy(rename.old, to: rename.new, in: data) }
    }

    /// `data`, a value's encoding, with each old name holding its new name's value (left out where that is absent or
    /// `null`). The last rename goes first, so every earlier name in a chain takes the value.
    package static func writing(_ data: Data, _ renames: [FieldRename]) -> Data {
        renames.reversed().reduce(data) { data, rename in
            copy(rename.new, to: rename.old, in: data, removingWithoutSource: true)
        }
    }

    /// `object` with `target` given `source`'s value byte for byte (removed when `source` is absent or `null` and
    /// `removingWithoutSource`); `object` itself when nothing changes or no object. A name is its first, as decoded.
    private static func copy(
        _ source: String, to target: String, in object: Data, removingWithoutSource: Bool = false
    ) -> Data {
        guard source != target else { return object }
        guard case let (bytes, members, _)? = JSONFill.object(object) else { return object }
        let from = members.first { $0.key == source }
        // A `null` written under the new name is no value for the old one, which an earlier version may need.
        let absent = from.map { removingWithoutSource && bytes[$0.value.range].elementsEqual("null".utf8) } ?? true
        guard let from, !absent else {
            guard removingWithoutSource, let index = members.firstIndex(where: { $0.key == target }) else {
                return object
            }
            return Data(removing(members, at: index, from: bytes))
        }
        let value = bytes[from.value.range]
        var result = bytes
        if let to = members.first(where: { $0.key == target }) {
            guard bytes[to.value.range] != value else { return object }
            result.replaceSubrange(to.value.range, with: value)
        } else {
            guard let name = try? JSONCoders.encoder.encode(target) else { return object }
            // Where the encoder's sorted keys put it, so the output stays plain.
            let member = [UInt8](name) + [UInt8(ascii: ":")] + value
            if let next = members.first(where: { $0.key > target }) {
                result.insert(contentsOf: member + [UInt8(ascii: ",")], at: next.rawKey.lowerBound)
            } else {
                let end = members[members.count - 1].value.range.upperBound  // before any trailing comma
                result.insert(contentsOf: [UInt8(ascii: ",")] + member, at: end)
            }
        }
        return Data(result)
    }

    /// `bytes`, an object, without its member at `index` and the comma that parts it from the others.
    private static func removing(_ members: [JSONFill.Member], at index: Int, from bytes: [UInt8]) -> [UInt8] {
        let member = members[index]
        var result = bytes
        if index + 1 < members.count {
            result.removeSubrange(member.rawKey.lowerBound..<members[index + 1].rawKey.lowerBound)
        } else if index > 0 {
            result.removeSubrange(members[index - 1].value.range.upperBound..<member.value.range.upperBound)
        } else {
            result.removeSubrange(member.rawKey.lowerBound..<member.value.range.upperBound)
        }
        return result
    }
}
