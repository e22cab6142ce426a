// The three versions of one stored type that the fleet tests run side by side: the in-process model
// (Tests/WLStorageTests/Model/FleetModelTests.swift) and the fleet of processes over a directory or a PostgreSQL table
// (FleetRun.swift, with the program in FleetProgram.swift). Every field of a value follows from the stamp of the set
// that made it, so that a reader can tell which set a stored value comes from, and which fields came from elsewhere;
// `mode`, which sets share, may be another set's (see `FleetVersion.changedBySet`).
//
// V1 `{stamp, theme, fontSize, mode}`; V2 adds `lineSpacing` (no migration: the added field comes from the default);
// V3 renames `theme` to `colorScheme` (declared with `.renamed`, so it reads `theme` and writes both), drops
// `lineSpacing`, and adds the case `spacious` to `mode`. Any version may run after any other (a deploy, a rollback).
//
// The model of what a version reads (``FleetVersion/reads(_:)``) is written here from the documented rule, not from the
// package: the fields it knows are read from the stored object (V3's `colorScheme` from `theme` when `theme` is there),
// those it lacks come from its default, and a field it knows holding JSON it cannot read (V1 and V2 meeting
// `spacious`) makes the value another version's.
import Foundation
import WLStorage

public enum FleetMode: String, Codable, Sendable {
    case compact, comfortable
}

public enum FleetModeV3: String, Codable, Sendable {
    case compact, comfortable, spacious
}

/// What a program of any version needs of its value type.
public protocol FleetValue: Codable, Equatable, Sendable {
    static var version: FleetVersion { get }
    static var defaultValue: Self { get }
    static var migrations: [WLStorageMigration<Self>] { get }
    /// What a set with `stamp` stores: every field follows from the stamp.
    static func made(by stamp: Int) -> Self
    var stamp: Int { get }
}

/// A value's fields by their name in the fleet (V3's `colorScheme` is `theme`), each as the text of its JSON.
public typealias FleetFields = [String: String]

public enum FleetVersion: Int, CaseIterable, CustomStringConvertible, Sendable {
    case v1 = 1, v2, v3

    public var description: String { "V\(rawValue)" }

    /// The fields of the version's type, by their name in the fleet.
    public var fields: [String] {
        self == .v2 ? ["stamp", "theme", "fontSize", "lineSpacing", "mode"] : ["stamp", "theme", "fontSize", "mode"]
    }

    /// The name of `field` in what this version stores and reads.
    public func storedName(_ field: String) -> String {
        self == .v3 && field == "theme" ? "colorScheme" : field
    }

    /// The members of a stored object that this version's type does not know, which its writes keep as they were.
    /// (V3 writes `theme` itself, as the old name of `colorScheme`.)
    public var unknownNames: [String] {
        switch self {
        case .v1: ["colorScheme", "lineSpacing"]
        case .v2: ["colorScheme"]
        case .v3: ["lineSpacing"]
        }
    }

    /// The versions whose writes hold the stored member `name` of their own (not kept from another version's).
    public static func writers(ofStoredName name: String) -> [FleetVersion] {
        allCases.filter { version in
            version.fields.contains { version.storedName($0) == name } || (version == .v3 && name == "theme")
        }
    }

    /// The field a stored member holds, in the fleet's names.
    public static func field(ofStoredName name: String) -> String {
        name == "colorScheme" ? "theme" : name
    }

    var modes: [String] {
        self == .v3 ? ["compact", "comfortable", "spacious"] : ["compact", "comfortable"]
    }

    /// The fields of the value a set with `stamp` makes in this version; the default's for 0.
    public func made(by stamp: Int) -> FleetFields {
        guard stamp != 0 else {
            var fields = ["stamp": "0", "theme": "light", "fontSize": "13", "mode": "compact"]
            if self == .v2 { fields["lineSpacing"] = "1" }
            return fields
        }
        let mode =
            self == .v3 && stamp % 5 == 0 ? "spacious" : (stamp % 2 == 0 ? "compact" : "comfortable")
        var fields = ["stamp": "\(stamp)", "theme": "t\(stamp)", "fontSize": "\(1_000 + stamp)", "mode": mode]
        if self == .v2 { fields["lineSpacing"] = "\(2_000 + stamp)" }
        return fields
    }

    /// Whether programs of this version cannot read a value that a set with `stamp` of `writer` makes.
    public func cannotRead(setOf writer: FleetVersion, stamp: Int) -> Bool {
        writer.made(by: stamp)["mode"].map { !modes.contains($0) } ?? false
    }

    /// What this version reads from stored bytes, by the rule: the fields it knows from the bytes (with a declared
    /// rename, the old name wins when it is there), the others from the default; `nil` when a field it knows holds JSON
    /// it cannot read, or the bytes hold no field it knows (another version's value). Nothing stored reads as the
    /// default.
    public func reads(_ data: Data?) -> FleetFields? {
        guard let data else { return made(by: 0) }
        guard var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        if self == .v3, let old = object["theme"] { object["colorScheme"] = old }
        let defaults = made(by: 0)
        var result = FleetFields()
        var knowsOne = false
        for field in fields {
            if let member = object[storedName(field)] {
                guard let text = text(of: member, as: field) else { return nil }
                result[field] = text
                knowsOne = true
            } else {
                result[field] = defaults[field]
            }
        }
        return knowsOne ? result : nil
    }

    /// The fields of a value of this version's type, as a program encodes it (every field there, under its name);
    /// `nil` when it is not one.
    public func value(_ data: Data) -> FleetFields? {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        var result = FleetFields()
        for field in fields {
            guard let member = object[storedName(field)], let text = text(of: member, as: field) else { return nil }
            result[field] = text
        }
        return result
    }

    /// The fields of bytes this version wrote: its value, and with the declared rename, the old name alike.
    public func written(_ data: Data) -> FleetFields? {
        guard let fields = value(data) else { return nil }
        if self == .v3 {
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
            guard let old = object?["theme"].flatMap({ text(of: $0, as: "theme") }), old == fields["theme"] else {
                return nil
            }
        }
        return fields
    }

    /// The fields that every set changes: each follows from the stamp alone, so no two sets share its value. A write
    /// carries only the fields its value changed against what it was read from, so `mode`, which sets share, is
    /// written only by a set that changes it, and may hold another set's.
    public static let changedBySet: Set<String> = ["stamp", "theme", "fontSize", "lineSpacing"]

    /// `fields` without those that a set may leave as another set made them (see ``changedBySet``).
    public static func setsOwn(_ fields: FleetFields?) -> FleetFields? {
        fields?.filter { changedBySet.contains($0.key) }
    }

    /// Whether `object`, stored by a set of this version that made `made`, holds the fields that every set changes as
    /// the set made them, under every name this version writes them (V3's `theme` as its old name too).
    public func holdsFieldsOfItsSet(_ object: [String: Any], _ made: FleetFields) -> Bool {
        for field in fields where Self.changedBySet.contains(field) {
            let names = self == .v3 && field == "theme" ? ["colorScheme", "theme"] : [storedName(field)]
            for name in names where object[name].flatMap(Self.text(ofMember:)) != made[field] { return false }
        }
        return true
    }

    /// The first field that every set changes (see ``changedBySet``) and that both this version and `other` know on
    /// which `fields` (this version's) and `others` (`other`'s) differ, described; `nil` when they agree on every one.
    public func disagreement(_ fields: FleetFields, with others: FleetFields, of other: FleetVersion) -> String? {
        for field in self.fields
        where Self.changedBySet.contains(field) && other.fields.contains(field) && fields[field] != others[field] {
            return "\(field) is \(fields[field] ?? "absent") here, \(others[field] ?? "absent") in the \(other) value"
        }
        return nil
    }

    /// The text of a stored member's JSON, as in ``FleetFields``: a string, or a whole number.
    public static func text(ofMember member: Any) -> String? {
        (member as? String) ?? (member as? NSNumber).flatMap { Int(exactly: $0.doubleValue) }.map { "\($0)" }
    }

    private func text(of member: Any, as field: String) -> String? {
        switch field {
        case "theme": return member as? String
        case "mode": return (member as? String).flatMap { modes.contains($0) ? $0 : nil }
        default: return (member as? NSNumber).flatMap { Int(exactly: $0.doubleValue) }.map { "\($0)" }
        }
    }
}

/// The first version's type.
public struct FleetValueV1: FleetValue {
    public var stamp: Int
    public var theme: String
    public var fontSize: Int
    public var mode: FleetMode

    public static var version: FleetVersion { .v1 }
    public static var defaultValue: Self { Self(stamp: 0, theme: "light", fontSize: 13, mode: .compact) }
    public static var migrations: [WLStorageMigration<Self>] { [] }

    public static func made(by stamp: Int) -> Self {
        Self(stamp: stamp, theme: "t\(stamp)", fontSize: 1_000 + stamp, mode: stamp % 2 == 0 ? .compact : .comfortable)
    }
}

/// The second: adds `lineSpacing`, with no migration.
public struct FleetValueV2: FleetValue {
    public var stamp: Int
    public var theme: String
    public var fontSize: Int
    public var lineSpacing: Int
    public var mode: FleetMode

    public static var version: FleetVersion { .v2 }
    public static var defaultValue: Self {
        Self(stamp: 0, theme: "light", fontSize: 13, lineSpacing: 1, mode: .compact)
    }
    public static var migrations: [WLStorageMigration<Self>] { [] }

    public static func made(by stamp: Int) -> Self {
        Self(
            stamp: stamp, theme: "t\(stamp)", fontSize: 1_000 + stamp, lineSpacing: 2_000 + stamp,
            mode: stamp % 2 == 0 ? .compact : .comfortable)
    }
}

/// The third: `theme` renamed `colorScheme` (declared), `lineSpacing` dropped, the case `spacious` added (for stamps
/// of 5n, which V1 and V2 cannot read).
public struct FleetValueV3: FleetValue {
    public var stamp: Int
    public var colorScheme: String
    public var fontSize: Int
    public var mode: FleetModeV3

    public static var version: FleetVersion { .v3 }
    public static var defaultValue: Self { Self(stamp: 0, colorScheme: "light", fontSize: 13, mode: .compact) }
    public static var migrations: [WLStorageMigration<Self>] { [.renamed(from: "theme", to: "colorScheme")] }

    public static func made(by stamp: Int) -> Self {
        Self(
            stamp: stamp, colorScheme: "t\(stamp)", fontSize: 1_000 + stamp,
            mode: stamp % 5 == 0 ? .spacious : (stamp % 2 == 0 ? .compact : .comfortable))
    }
}
