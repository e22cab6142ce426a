import Foundation

/// A field renamed while programs that know only its old name still run: the expand step of a rename.
///
/// The storage reads the old name while it is there and writes both names, so that a change made through either
/// version is seen by the other. A version that knows only the old name keeps the new one untouched (it is a field
/// it does not know), so when the two hold different values, the old name's is the newer: this version writes both
/// alike.
struct FieldRename: Sendable, Equatable {
    let old: String
    let new: String

    /// `data`, a stored JSON object, with each new name holding its old name's value where the old name is there and
    /// the two differ; `data` itself when there is nothing to change or it is not an object.
    static func reading(_ data: Data, _ renames: [FieldRename]) -> Data {
        renames.reduce(data) { data, rename in copy(rename.old, to: rename.new, in: data) }
    }

    /// `data`, the encoding of a value, with each old name holding its new name's value.
    static func writing(_ data: Data, _ renames: [FieldRename]) -> Data {
        renames.reduce(data) { data, rename in copy(rename.new, to: rename.old, in: data) }
    }

    /// The members of `object` with the one named `target` given the value of the one named `source`, byte for byte;
    /// `object` itself when there is no `source`, when the two are alike already, or when it is no JSON object.
    private static func copy(_ source: String, to target: String, in object: Data) -> Data {
        let bytes = JSONFill.withoutByteOrderMark([UInt8](object))
        var parser = JSONFill.Parser(bytes: bytes)
        guard case .object(let members, let range)? = parser.parseValue(depth: 0),
            let from = members.last(where: { $0.key == source })
        else { return object }
        let value = bytes[from.value.range]
        var result = bytes
        if let to = members.last(where: { $0.key == target }) {
            guard bytes[to.value.range] != value else { return object }
            result.replaceSubrange(to.value.range, with: value)
        } else {
            guard let name = try? JSONCoders.encoder.encode(target) else { return object }
            // Where the encoder's sorted keys put it, so that what is written stays its plain output.
            let next = members.first { $0.key > target }
            var member = [UInt8](name) + [UInt8(ascii: ":")] + value
            let position: Int
            if let next {
                position = next.rawKey.lowerBound
                member.append(UInt8(ascii: ","))
            } else {
                position = range.upperBound - 1  // before the closing brace
                if !members.isEmpty { member.insert(UInt8(ascii: ","), at: 0) }
            }
            result.insert(contentsOf: member, at: position)
        }
        return Data(result)
    }
}
