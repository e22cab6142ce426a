import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

private struct SavedProfile: Codable, Equatable {
    var name: String
    var visits: Int
}

/// The earlier shape, read through a migration.
private struct SavedProfileV0: Codable {
    var login: String
}

private let savedProfileMigrations: [WLStorageMigration<SavedProfile>] = [
    .from(SavedProfileV0.self) { SavedProfile(name: $0.login, visits: 1) }
]

/// A storage opened where nothing was stored saves its default at its first flush (or tick); when another program
/// stored a value of an earlier shape in the meantime, the save reads that value instead, through the migration, and
/// the flush writes it back in the current shape before it returns, as it would have had the storage read it at its
/// open: a flush that returns with no error leaves nothing pending.
@Suite(.onTestThreads) struct DefaultSaveFindsOlderShapeTests {
    @Test func aFlushWhoseDefaultSaveFindsAnOlderShapeWritesItBackBeforeReturning() throws {
        try withTemporaryDirectory { scratch in
            let directory = scratch.appendingPathComponent("store")
            let scheduler = ManualScheduler()
            let storage = WLStorage(
                defaultValueClosure: { SavedProfile(name: "new", visits: 0) }, flushInterval: nil,
                backer: WLStorageDefaultBacker<SavedProfile>(key: "profile", directory: directory),
                migrations: savedProfileMigrations, scheduler: scheduler)
            // The file monitor is held until the flush has run: had the storage heard of the other program's value
            // first, it would have read it as a change made elsewhere, which it never writes back.
            try whileTheFileMonitorIsHeld(scratch: scratch) {
                // The default waits to be saved (the manual clock runs no tick); another program stores the earlier
                // shape.
                try Data(#"{"login":"ada"}"#.utf8).write(
                    to: directory.appendingPathComponent("profile"), options: .atomic)

                storage.flush()
            }
            #expect(storage.wrappedValue == SavedProfile(name: "ada", visits: 1))
            #expect(!storage.hasPendingChanges, "the flush returned with the rewrite pending")
            #expect(storage.lastError == nil)
            #expect(stored(SavedProfile.self, key: "profile", in: directory) == SavedProfile(name: "ada", visits: 1))
        }
    }
}
