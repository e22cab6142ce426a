import Foundation
import WLStorageJSON

/// How a value stored by an earlier version of the program, as an earlier type, becomes the current one.
///
/// ```swift
/// @WLStorage(key: "settings", defaultValue: Settings(), migrations: [
///     .from(SettingsV1.self) { old in Settings(theme: old.darkMode ? "dark" : "light") },
/// ])
/// var settings: Settings
/// ```
///
/// When what is stored does not decode, even with missing fields taken from the default, the migrations are tried in
/// order: the first whose type decodes it converts it, and the result is written back in the current shape. When none
/// applies, the bytes are kept aside. Chain conversions with ``then(_:)``; see <doc:ChangingAStoredType> for examples.
public struct WLStorageMigration<Value>: Sendable {
    /// What trying a migration on some bytes gave.
    enum Attempt {
        case notDecoded
        case converted(Value)
        case failed(any Error)

        /// A conversion's outcome: its value, or what it threw.
        init(_ conversion: Result<Value, any Error>) {
            switch conversion {
            case .success(let value): self = .converted(value)
            case .failure(let error): self = .failed(error)
            }
        }
    }

    /// The name of the type the migration decodes, for messages.
    let sourceType: String
    let attempt: @Sendable (Data) -> Attempt
    /// The field it renames, for a rename: read before the other steps, and written under both names.
    let rename: FieldRename?

    private init(sourceType: String, rename: FieldRename? = nil, attempt: @escaping @Sendable (Data) -> Attempt) {
        self.sourceType = sourceType
        self.rename = rename
        self.attempt = attempt
    }

    /// A field renamed from `oldName` to `newName`, safe while versions that know only the old name still run.
    ///
    /// The storage reads the old name while it is stored and writes both (see <doc:ChangingAStoredType>). Once no
    /// program knows only the old name, drop the rename and call ``WLStorage/removeUnknownFields()``. Top-level fields
    /// only; declare chains oldest first, and the same renames in every storage of a key.
    ///
    /// - Parameters:
    ///   - oldName: The field's name in the earlier versions, as they encode it.
    ///   - newName: The field's name in this version, as the type encodes it.
    public static func renamed(from oldName: String, to newName: String) -> Self {
        let rename = FieldRename(old: oldName, new: newName)
        return Self(sourceType: "the rename of \(oldName) to \(newName)", rename: rename) { _ in .notDecoded }
    }

    /// A migration from values stored as `type`.
    ///
    /// - Parameters:
    ///   - type: The earlier type, as the earlier version of the program stored it.
    ///   - convert: Makes the current value from the earlier one, outside the package's locks; if it throws, the next
    ///     migration is tried.
    public static func from<Old: Decodable & SendableMetatype>(
        _ type: Old.Type, _ convert: @escaping @Sendable (Old) throws -> Value
    ) -> Self {
        Self(sourceType: String(describing: type)) { data in
            guard let old = try? JSONCoders.decoder.decode(Old.self, from: data) else { return .notDecoded }
            return Attempt(Result { try convert(old) })
        }
    }

    /// This migration, then one more conversion: `.from(SettingsV1.self) { SettingsV2($0) }.then { Settings($0) }`.
    public func then<Next>(_ convert: @escaping @Sendable (Value) throws -> Next) -> WLStorageMigration<Next> {
        let attempt = self.attempt
        return WLStorageMigration<Next>(sourceType: sourceType) { data in
            switch attempt(data) {
            case .notDecoded: .notDecoded
            case .failed(let error): .failed(error)
            case .converted(let value): .init(Result { try convert(value) })
            }
        }
    }
}
