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

    private init(sourceType: String, attempt: @escaping @Sendable (Data) -> Attempt) {
        self.sourceType = sourceType
        self.attempt = attempt
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
