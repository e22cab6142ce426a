// The two versions of one stored type that the fleet tests run side by side: the in-process model
// (Tests/WLStorageTests/FleetModelTests.swift) and the fleet of processes over a directory or a PostgreSQL table
// (FleetRun.swift, with the program in FleetProgram.swift). Every field of a value follows from the stamp of the set
// that made it, so that a reader can tell which set a stored value comes from, and which fields came from elsewhere.
import Foundation
import WLStorage

public enum FleetModeV1: String, Codable, Sendable {
    case compact, comfortable
}

public enum FleetModeV2: String, Codable, Sendable {
    case compact, comfortable, spacious
}

public struct FleetWindowV1: Codable, Equatable, Sendable {
    public var width: Int

    public init(width: Int) {
        self.width = width
    }
}

public struct FleetWindowV2: Codable, Equatable, Sendable {
    public var width: Int
    public var depth: Int

    public init(width: Int, depth: Int) {
        self.width = width
        self.depth = depth
    }
}

/// What a program of either version needs of its value type.
public protocol FleetValue: Codable, Equatable, Sendable {
    static var version: FleetVersion { get }
    static var defaultValue: Self { get }
    static var migrations: [WLStorageMigration<Self>] { get }
    /// What a set with `stamp` stores: every field follows from the stamp.
    static func made(by stamp: Int) -> Self
    /// What this version reads from `data`, as the rule says: the bytes as they are, or through the migration;
    /// `nil` when they are another version's that it cannot read.
    static func expected(from data: Data) -> Self?
    var stamp: Int { get }
}

public enum FleetVersion: Int, CustomStringConvertible, Sendable {
    case v1 = 1, v2

    public var description: String { "V\(rawValue)" }

    /// The members of the stored object this version does not know: kept by its writes.
    public var unknownPaths: [[String]] {
        switch self {
        case .v1: [["theme"], ["zoom"], ["note"], ["window", "depth"]]
        case .v2: [["darkMode"]]
        }
    }

    /// The other version.
    public var other: FleetVersion { self == .v1 ? .v2 : .v1 }
}

/// The older version's type.
public struct FleetValueV1: FleetValue {
    public var stamp: Int
    public var darkMode: Bool
    public var window: FleetWindowV1
    public var mode: FleetModeV1

    public init(stamp: Int, darkMode: Bool, window: FleetWindowV1, mode: FleetModeV1) {
        self.stamp = stamp
        self.darkMode = darkMode
        self.window = window
        self.mode = mode
    }

    public static var version: FleetVersion { .v1 }
    public static var defaultValue: Self {
        Self(stamp: 0, darkMode: false, window: FleetWindowV1(width: 800), mode: .compact)
    }
    public static var migrations: [WLStorageMigration<Self>] { [] }

    public static func made(by stamp: Int) -> Self {
        Self(
            stamp: stamp, darkMode: stamp % 2 == 1, window: FleetWindowV1(width: 1_000 + stamp),
            mode: stamp % 3 == 0 ? .comfortable : .compact)
    }

    public static func expected(from data: Data) -> Self? {
        try? JSONDecoder().decode(Self.self, from: data)
    }
}

/// The newer version's type: `darkMode` became `theme`; `zoom`, `note`, `window.depth` and the case `spacious` are
/// new. Its migration from the older type throws for some values (stamps of 7n + 3), which it then cannot read.
public struct FleetValueV2: FleetValue {
    public var stamp: Int
    public var theme: String
    public var window: FleetWindowV2
    public var mode: FleetModeV2
    public var zoom: Int
    public var note: String?

    public init(stamp: Int, theme: String, window: FleetWindowV2, mode: FleetModeV2, zoom: Int, note: String? = nil) {
        self.stamp = stamp
        self.theme = theme
        self.window = window
        self.mode = mode
        self.zoom = zoom
        self.note = note
    }

    public struct CannotConvert: Error {}

    public static var version: FleetVersion { .v2 }
    public static var defaultValue: Self {
        Self(stamp: 0, theme: "light", window: FleetWindowV2(width: 800, depth: 0), mode: .compact, zoom: 100)
    }
    public static var migrations: [WLStorageMigration<Self>] { [.from(FleetValueV1.self) { try migrated($0) }] }

    public static func migrated(_ old: FleetValueV1) throws -> Self {
        guard old.stamp % 7 != 3 else { throw CannotConvert() }
        return Self(
            stamp: old.stamp, theme: old.darkMode ? "dark" : "light",
            window: FleetWindowV2(width: old.window.width, depth: -old.stamp),
            mode: old.mode == .compact ? .compact : .comfortable, zoom: -old.stamp)
    }

    public static func made(by stamp: Int) -> Self {
        Self(
            stamp: stamp, theme: "t\(stamp)", window: FleetWindowV2(width: 1_000 + stamp, depth: 2_000 + stamp),
            mode: [.compact, .comfortable, .spacious][stamp % 3], zoom: 3_000 + stamp,
            note: stamp % 2 == 0 ? "n\(stamp)" : nil)
    }

    public static func expected(from data: Data) -> Self? {
        if let value = try? JSONDecoder().decode(Self.self, from: data) { return value }
        guard let old = try? JSONDecoder().decode(FleetValueV1.self, from: data) else { return nil }
        return try? migrated(old)
    }
}
