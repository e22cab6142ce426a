import Foundation
import WLStorageFiles
import WLStorageJSON

/// Where bytes were read from, as a storage's messages name it: a file, or a key of a store.
struct StoredPlace: Sendable {
    let key: String
    /// What holds the bytes, as a sentence's subject: "the file", "the key's value in <identity>".
    let subject: String
    /// The file, when the bytes are a file's: its path is made only for a message.
    let file: (directory: StorageDirectory, name: String)?
    /// Whether the store's values are secret (``StoreCapabilities/conceals``): messages then do not quote the bytes.
    let conceals: Bool

    var path: String? { file.map { $0.directory.filePath($0.name) } }

    static func file(key: String, _ name: String, in directory: StorageDirectory) -> StoredPlace {
        StoredPlace(key: key, subject: "the file", file: (directory, name), conceals: false)
    }
}

/// What stored bytes are to a storage of a value type: the one path from bytes to a value, for every backer. Another
/// version's bytes and sealed bytes are left; anything else that does not decode is kept aside by the backer.
enum StoredBytes<T: Codable & Sendable> {
    /// The value, in the current shape or with fields filled from the default (not written back: reading never writes).
    case value(T)
    /// The value via a migration from the type named, written back in the current shape; the bytes kept until then.
    case migrated(T, from: String)
    /// Bytes another version of the program stored, or sealed by an encrypted store read without its key: left.
    case anotherVersion(WLStorageError)
    case sealedElsewhere(WLStorageError)
    /// Bytes that do not decode: what is wrong with them (`judged`, a phrase after the place's subject) and the error.
    case undecodable(judged: String, error: (any Error)?)

    /// Reads `data` from `place` through `decoding`'s steps (the plain decode first, unless it threw `plainError`).
    static func read(
        _ data: Data, at place: StoredPlace, decoding: ValueDecoding<T>, plainError: (any Error)? = nil
    ) -> Self {
        switch decoding.decode(data, plainError: plainError) {
        case .decoded(let value, nil):
            return .value(value)
        case .decoded(let value, let type?):
            return .migrated(value, from: type)
        case .anotherVersion(let error, let failures):
            // Left as it is: its version may still be at work, or come back after a rollback.
            return .anotherVersion(
                WLStorageError(
                    code: .storedByAnotherVersion,
                    message: "\(place.subject) \(judge(data, failures, place)): another version of the program stored"
                        + " it; it is left as it is, and this storage uses its last value (the default at start) until"
                        + " it is set",
                    key: place.key, path: place.path, underlying: place.conceals ? nil : error))
        case .undecodable(let error, let failures):
            if !place.conceals, let sealed = SealedElsewhere.error(data, key: place.key, path: place.path) {
                return .sealedElsewhere(sealed)
            }
            return .undecodable(judged: judge(data, failures, place), error: place.conceals ? nil : error)
        }
    }

    /// What `data`, found by a check for an outside change, changes: the value, or sealed bytes left; throws for bytes
    /// this version cannot read, which a check reports and never keeps aside.
    static func change(
        _ data: Data, at place: StoredPlace, decoding: ValueDecoding<T>
    ) throws(WLStorageError) -> ExternalChange<T> {
        do {
            return .changed(try decoding.value(of: data))
        } catch {
            if !place.conceals, let sealed = SealedElsewhere.error(data, key: place.key, path: place.path) {
                return .unreadable(sealed)
            }
            throw failure(
                error, data, at: place, finding: "someone changed \(place.subject), which now",
                outcome: "; the value in memory is kept and what is stored is left as it is")
        }
    }

    /// The error for `data` at `place` this version cannot read; `finding` opens the message, `outcome` ends it.
    static func failure(
        _ error: DecodingFailure, _ data: Data, at place: StoredPlace, finding: String, outcome: String
    ) -> WLStorageError {
        WLStorageError(
            code: error.anotherVersion ? .storedByAnotherVersion : .decodingFailed,
            message: "\(finding) \(judge(data, error.migrationFailures, place))"
                + (error.anotherVersion ? " (another version of the program stored them)" : "") + outcome,
            key: place.key, path: place.path, underlying: place.conceals ? nil : error.error)
    }

    /// Why `data` did not decode: not JSON (and why) or JSON of another shape, and failed migrations; less if secret.
    private static func judge(_ data: Data, _ failures: [String], _ place: StoredPlace) -> String {
        if place.conceals { return "does not decode as \(T.self)" }
        let what = JSONSyntax.problem(in: data).map { "is not JSON (\($0)), so it does not decode as" }
        let base = "\(what ?? "holds JSON that does not decode as") \(T.self)"
        guard !failures.isEmpty else { return base }
        return base + " (" + failures.joined(separator: "; ") + ")"
    }
}
