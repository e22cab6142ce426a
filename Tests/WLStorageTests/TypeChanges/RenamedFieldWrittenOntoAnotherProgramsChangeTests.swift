import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

// A version with a declared rename writes both names alike, also when its change goes onto another program's: after a
// rollback, an earlier version changed the old name (the names differ), the new version, deployed again, changes
// another field while a third program changes one more, and its write is merged onto that program's.

private struct Settings: Codable, Equatable, Sendable {
    var colorScheme = "light"
    var fontSize = 13
    var tabWidth = 4
}

@Suite(.capturingOutput) struct RenamedFieldWrittenOntoAnotherProgramsChangeTests {
    /// How the change is written: by the storage's own flush, or by a flush of every storage (its batch on condition
    /// refused, then written on its own).
    enum Flush: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case own, everyStorage
        var testDescription: String { rawValue }
    }

    @Test(arguments: Flush.allCases)
    func aMergedWriteLeavesBothNamesHoldingTheValueRead(flush: Flush) throws {
        let store = MemoryStore()
        // An earlier version, rolled back to, changed `theme` after the new version wrote both names `dark`.
        store.writeFromOutside("settings", json: #"{"colorScheme":"dark","fontSize":15,"tabWidth":8,"theme":"blue"}"#)
        let storage = WLStorage(
            key: "settings", defaultValue: Settings(), flushInterval: nil, store: store,
            migrations: [.renamed(from: "theme", to: "colorScheme")])
        #expect(storage.wrappedValue == Settings(colorScheme: "blue", fontSize: 15, tabWidth: 8))
        #expect(eventually { storage.cell.state.withLock { !$0.isBusy } })
        storage.wrappedValue.tabWidth = 2
        // The earlier version adds a field of its own, unheard of yet.
        store.writeUnreported(
            "settings", json: #"{"colorScheme":"dark","fontSize":15,"lineSpacing":3,"tabWidth":8,"theme":"blue"}"#)
        switch flush {
        case .own: storage.flush()
        case .everyStorage: flushAllStores([store])
        }
        #expect(!storage.hasPendingChanges, "\(String(describing: storage.lastError))")
        let stored = try #require(store.stored("settings"))
        // Both names hold what this version read and holds: a later version that reads `colorScheme` alone (the
        // contract step of the rename) reads the earlier version's change, not the value it replaced.
        #expect(stored == #"{"colorScheme":"blue","fontSize":15,"lineSpacing":3,"tabWidth":2,"theme":"blue"}"#)
    }
}
