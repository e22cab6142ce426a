import Foundation

/// One encoder and one decoder for every backer: the reference library's format, the plain `JSONEncoder` output of
/// the value, with its keys sorted, so that equal values give equal files (stable and diffable, in whatever order a
/// dictionary hands out its keys) and any JSON decoder, the reference library's included, reads them. Both are safe
/// to share between threads, and making one costs more than a small decode.
enum JSONCoders {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()
    static let decoder = JSONDecoder()

    /// What is wrong with bytes that do not decode, in the words the command-line tool uses for the same bytes:
    /// they are not JSON (and why), or they are JSON of another shape.
    static func judge(_ data: Data) -> String {
        if let problem = JSONSyntax.problem(in: data) { return "is not JSON (\(problem)), so it does not decode as" }
        return "holds JSON that does not decode as"
    }

    /// The bytes of `value`, the value of `key`, with its renamed fields under their old names too (see
    /// ``FieldRename``) and the members of `base` (the stored bytes it replaces) that its type does not know (see
    /// ``UnknownFields``), checked against the maximum value size.
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
            // An old name the value left out (see above) may come back from the stored bytes: it goes again.
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
