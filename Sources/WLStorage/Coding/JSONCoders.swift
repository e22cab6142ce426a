import Foundation
import WLStorageJSON

extension JSONCoders {
    /// The bytes of `value` with renamed fields' old names and `base`'s unknown members, size-checked.
    static func encode<T: Codable>(
        _ value: T, key: String, renaming renames: [FieldRename] = [], keepingUnknownOf base: Data?
    ) throws(WLStorageError) -> Data {
        var data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw WLStorageError(
                code: .encodingFailed, message: "the value does not encode as JSON", key: key, underlying: error)
        }
        if !renames.isEmpty { data = FieldRename.writing(data, renames) }
        let plain = data.count
        if let base, let merged = UnknownFields.merging(data, keepingUnknownOf: base, as: T.self) {
            // An old name the value left out may come back from the stored bytes: it goes again.
            data = renames.isEmpty ? merged : FieldRename.writing(merged, renames)
        }
        let limit = ValueSizeLimit.maximum
        guard data.count <= limit else {
            // A value that fits alone is refused for the fields it keeps: say so, and how to write it.
            let kept =
                plain <= limit
                ? ", and to \(data.count) bytes with the fields of the stored value that its type does not know, which"
                    + " a write keeps (removeUnknownFields() writes it without them)," : ","
            throw WLStorageError(
                code: .valueTooLarge,
                message: "the value encodes to \(plain) bytes\(kept) more than the maximum value size of \(limit)"
                    + " bytes; it is not written and stays pending",
                key: key)
        }
        return data
    }
}
