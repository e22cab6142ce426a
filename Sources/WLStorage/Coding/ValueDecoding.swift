import Foundation
import WLStorageJSON

/// How stored bytes become the value: a plain decode, else the missing fields from the default's JSON, then migrations.
struct ValueDecoding<T: Codable & Sendable> {
    /// Makes the value whose fields fill in those stored bytes lack; called only when a decode failed.
    let defaultValue: () -> T
    let migrations: [WLStorageMigration<T>]

    /// What the bytes decode to: the value (and the type a migration took it from), another version's JSON (left), or
    /// not JSON. A value with fields filled from the default is no migration: it is not written back.
    enum Outcome {
        case decoded(T, migratedFrom: String?)
        case anotherVersion(any Error, migrationFailures: [String])
        case undecodable(any Error, migrationFailures: [String])
    }

    /// Reads `stored` through the steps, renames first; bytes no migration reads that share fields with this type are
    /// another version's value. `plainError`: what decoding `stored` as the type threw, if the caller tried already.
    func decode(_ stored: Data, plainError: (any Error)? = nil) -> Outcome {
        let renames = migrations.compactMap(\.rename)
        let data = renames.isEmpty ? stored : FieldRename.reading(stored, renames)
        let firstError: any Error
        if let plainError, renames.isEmpty {
            firstError = plainError
        } else {
            do {
                return .decoded(try JSONCoders.decoder.decode(T.self, from: data), migratedFrom: nil)
            } catch {
                firstError = error
            }
        }
        // A value filled in that keeps some of the bytes' members, but not all: taken after the migrations.
        var mapped: T?
        if let defaults = try? JSONCoders.encoder.encode(defaultValue()),
            let value = JSONFill.filled(data, failing: firstError, from: defaults, as: T.self)?.value,
            let encoded = try? JSONCoders.encoder.encode(value)
        {
            // Taken at once when it keeps every member of the bytes (renames' old names are the type's too); else a
            // migration that decodes them comes first (a renamed field would take the default's value).
            let written = renames.isEmpty ? encoded : FieldRename.writing(encoded, renames)
            let coverage = JSONFill.coverage(of: data, in: written)
            if coverage.any && coverage.all { return .decoded(value, migratedFrom: nil) }
            if coverage.any { mapped = value }
        }
        var failures: [String] = []
        for migration in migrations where migration.rename == nil {
            switch migration.attempt(data) {
            case .notDecoded:
                continue
            case .converted(let value):
                // A value that cannot be encoded could never be written back: the migration does not apply.
                guard (try? JSONCoders.encoder.encode(value)) != nil else {
                    failures.append("the migration from \(migration.sourceType) made a value that does not encode")
                    continue
                }
                return .decoded(value, migratedFrom: migration.sourceType)
            case .failed(let error):
                failures.append("the migration from \(migration.sourceType) threw \(error)")
            }
        }
        // Another version's value that this one can map, unless a migration that read the bytes threw.
        if failures.isEmpty, let mapped { return .decoded(mapped, migratedFrom: nil) }
        if JSONSyntax.problem(in: data) == nil { return .anotherVersion(firstError, migrationFailures: failures) }
        return .undecodable(firstError, migrationFailures: failures)
    }

    /// Decodes bytes that another program stored, or throws what ``decode(_:)`` found.
    func value(of data: Data) throws(DecodingFailure) -> T {
        switch decode(data) {
        case .decoded(let value, _): return value
        case .anotherVersion(let error, let failures):
            throw DecodingFailure(error: error, migrationFailures: failures, anotherVersion: true)
        case .undecodable(let error, let failures):
            throw DecodingFailure(error: error, migrationFailures: failures, anotherVersion: false)
        }
    }
}

/// Bytes that decoded through no step of ``ValueDecoding``.
struct DecodingFailure: Error {
    let error: any Error
    let migrationFailures: [String]
    /// Whether the bytes are JSON that another version of the type stored (see ``ValueDecoding/Outcome``).
    let anotherVersion: Bool
}
