import Foundation

/// How a value stored by an earlier version of the program, as an earlier type, becomes the current one.
///
/// Give a storage its earlier types, newest first, and how to convert each:
///
/// ```swift
/// @WLStorage(key: "settings", defaultValue: Settings(), migrations: [
///     .from(SettingsV1.self) { old in Settings(theme: old.darkMode ? "dark" : "light") },
/// ])
/// var settings: Settings
/// ```
///
/// When what is stored does not decode as the storage's type, even with the fields it lacks taken from the default
/// value, the migrations are tried in order: the first whose type decodes it converts it, and the storage uses the
/// result and writes it back in the current shape (the bytes as they were are kept next to it until that write
/// succeeds). A migration that throws counts as one that does not apply: the next one is tried. When none applies,
/// what is stored is kept aside, as any value that does not decode.
///
/// A migration converts to the current type directly; to go through the types in between, chain conversions with
/// ``then(_:)``.
public struct WLStorageMigration<Value>: Sendable {
    /// What trying a migration on some bytes gave.
    enum Attempt {
        /// The bytes do not decode as the migration's type.
        case notDecoded
        /// They decode and convert to this value.
        case converted(Value)
        /// They decode, and the conversion threw this error.
        case failed(any Error)
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

    /// A field of the value renamed from `oldName` to `newName`, safe while versions that know only the old name still
    /// run (the expand step of an expand-and-contract rename).
    ///
    /// The storage reads the old name while it is stored, and writes the value under both names, so that a change
    /// made through either version is seen by the other:
    ///
    /// - A value stored with the old name alone (by an earlier version) reads as if it had the new name too, and is
    ///   not written back: reading never writes.
    /// - A value with both names that differ was last changed by a version that knows only the old name (this version
    ///   always writes both alike), so the old name's value is read.
    /// - Every write holds the new name and the old name with the same value; when the value leaves the new name out
    ///   or writes `null` (an optional set to `nil`), the old name is left out too.
    ///
    /// ```swift
    /// @WLStorage(key: "settings", defaultValue: Settings(), migrations: [
    ///     .renamed(from: "theme", to: "colorScheme"),
    /// ])
    /// var settings: Settings    // Settings has `colorScheme`, no longer `theme`
    /// ```
    ///
    /// Once no program that knows only the old name runs, contract: release a version without the rename, which
    /// reads and writes the new name alone, and call ``WLStorage/removeUnknownFields()`` to drop the old one.
    ///
    /// A rename applies to a field of the stored object itself, not to fields of objects inside it. Renames are
    /// read in the order given, before every other step, and written in the reverse order: declare a field renamed
    /// twice oldest first, `.renamed(from: "a", to: "b"), .renamed(from: "b", to: "c")`, and every write holds all
    /// three names. Declare the same renames in every storage of a key: a storage that brings a rename to a key open
    /// already has it read again.
    ///
    /// - Parameters:
    ///   - oldName: The field's name in the earlier versions, as they encode it.
    ///   - newName: The field's name in this version, as the type encodes it.
    public static func renamed(from oldName: String, to newName: String) -> Self {
        Self(sourceType: "the rename of \(oldName) to \(newName)", rename: FieldRename(old: oldName, new: newName)) {
            _ in
            .notDecoded
        }
    }

    /// A migration from values stored as `type`.
    ///
    /// - Parameters:
    ///   - type: The earlier type, as the earlier version of the program stored it.
    ///   - convert: Makes the current value from the earlier one. It may throw: the next migration is then tried.
    ///     It runs while the storage reads, with no lock of the package held.
    public static func from<Old: Decodable & SendableMetatype>(
        _ type: Old.Type, _ convert: @escaping @Sendable (Old) throws -> Value
    ) -> Self {
        Self(sourceType: String(describing: type)) { data in
            let old: Old
            do {
                old = try JSONCoders.decoder.decode(Old.self, from: data)
            } catch {
                return .notDecoded
            }
            do {
                return .converted(try convert(old))
            } catch {
                return .failed(error)
            }
        }
    }

    /// This migration followed by one more conversion: how a value of two versions ago goes through the type of the
    /// version in between.
    ///
    /// ```swift
    /// migrations: [
    ///     .from(SettingsV2.self) { Settings($0) },
    ///     WLStorageMigration.from(SettingsV1.self) { SettingsV2($0) }.then { Settings($0) },
    /// ]
    /// ```
    public func then<Next>(_ convert: @escaping @Sendable (Value) throws -> Next) -> WLStorageMigration<Next> {
        let attempt = self.attempt
        return WLStorageMigration<Next>(sourceType: sourceType) { data in
            switch attempt(data) {
            case .notDecoded:
                return .notDecoded
            case .failed(let error):
                return .failed(error)
            case .converted(let value):
                do {
                    return .converted(try convert(value))
                } catch {
                    return .failed(error)
                }
            }
        }
    }
}
