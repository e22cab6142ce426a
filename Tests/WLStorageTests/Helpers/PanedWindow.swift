// A type whose earlier version stored only a title, and its migration.
import Foundation

@testable import WLStorage

struct WindowPane: Codable, Equatable {
    var width = 800
    var height = 600
}

/// The earlier version stored `title` only; this one renamed it `name` and added `pane`.
struct PanedWindow: Codable, Equatable {
    var name: String
    var pane: WindowPane
}

/// A value of the earlier version is migrated, and written back in the current shape.
let panedWindowMigrations: [WLStorageMigration<PanedWindow>] = [
    .from(PanedWindowV1.self) { PanedWindow(name: $0.title, pane: WindowPane()) }
]

struct PanedWindowV1: Codable {
    var title: String
}
